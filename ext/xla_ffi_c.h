/* The XLA FFI C API header, included from C. The header of jaxlib 0.4.x declares these structs
   without typedefs (C++ accepts that, C does not); from jaxlib 0.5.0 it has the same typedefs,
   which C11 allows to repeat. */
typedef struct XLA_FFI_TypeId XLA_FFI_TypeId;
typedef struct XLA_FFI_ByteSpan XLA_FFI_ByteSpan;
typedef struct XLA_FFI_Scalar XLA_FFI_Scalar;
typedef struct XLA_FFI_Array XLA_FFI_Array;
typedef struct XLA_FFI_Handler_Bundle XLA_FFI_Handler_Bundle;
#include "xla/ffi/api/c_api.h"

#ifndef MPINB_BUILD_JAXLIB  /* the version of the jaxlib whose header this is (setup.py) */
#define MPINB_BUILD_JAXLIB "unknown"
#endif

/* jaxlib 0.4.38 inserted XLA_FFI_ThreadPool_NumThreads before the futures in XLA_FFI_Api while
   keeping the API version (0.1): a library compiled against an older header (the release wheel's
   is the floor's, 0.4.36) finds the futures one slot further on a newer jaxlib. The loader
   (mpinb/mpi/library.py) sets the shift from the two jaxlib versions before any handler runs. */
static int mpinb_future_shift = 0;

static inline int mpinb_has_futures(const XLA_FFI_Api* api) {
  return (&api->XLA_FFI_Future_Create)[mpinb_future_shift] != NULL;
}
static inline XLA_FFI_Error* mpinb_future_create(const XLA_FFI_Api* api, XLA_FFI_Future_Create_Args* args) {
  return (&api->XLA_FFI_Future_Create)[mpinb_future_shift](args);
}
static inline XLA_FFI_Error* mpinb_future_set_available(const XLA_FFI_Api* api,
                                                        XLA_FFI_Future_SetAvailable_Args* args) {
  return (&api->XLA_FFI_Future_SetAvailable)[mpinb_future_shift](args);
}
static inline XLA_FFI_Error* mpinb_future_set_error(const XLA_FFI_Api* api, XLA_FFI_Future_SetError_Args* args) {
  return (&api->XLA_FFI_Future_SetError)[mpinb_future_shift](args);
}

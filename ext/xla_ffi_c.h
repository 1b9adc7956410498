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

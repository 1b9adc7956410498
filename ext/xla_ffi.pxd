# Declarations of the parts of the XLA FFI C API (xla/ffi/api/c_api.h, shipped in jaxlib)
# that the mpinb handlers use. Only what is needed is declared; field order does not
# matter to Cython, names and types do.

from libc.stdint cimport int64_t, uint32_t

cdef extern from "xla_ffi_c.h" nogil:  # xla/ffi/api/c_api.h, see there
    const char* MPINB_BUILD_JAXLIB
    enum: XLA_FFI_API_MAJOR
    enum: XLA_FFI_API_MINOR

    ctypedef enum XLA_FFI_Extension_Type:
        XLA_FFI_Extension_Metadata

    ctypedef struct XLA_FFI_Extension_Base:
        size_t struct_size
        XLA_FFI_Extension_Type type
        XLA_FFI_Extension_Base* next

    ctypedef struct XLA_FFI_Api_Version:
        size_t struct_size
        XLA_FFI_Extension_Base* extension_start
        int major_version
        int minor_version
    enum: XLA_FFI_Api_Version_STRUCT_SIZE

    ctypedef struct XLA_FFI_Error:
        pass

    ctypedef enum XLA_FFI_Error_Code:
        XLA_FFI_Error_Code_OK
        XLA_FFI_Error_Code_INVALID_ARGUMENT
        XLA_FFI_Error_Code_OUT_OF_RANGE
        XLA_FFI_Error_Code_UNIMPLEMENTED
        XLA_FFI_Error_Code_INTERNAL
        XLA_FFI_Error_Code_FAILED_PRECONDITION
        XLA_FFI_Error_Code_ABORTED

    ctypedef struct XLA_FFI_Error_Create_Args:
        size_t struct_size
        XLA_FFI_Extension_Base* extension_start
        const char* message
        XLA_FFI_Error_Code errc
    enum: XLA_FFI_Error_Create_Args_STRUCT_SIZE

    ctypedef enum XLA_FFI_DataType:
        XLA_FFI_DataType_INVALID
        XLA_FFI_DataType_PRED
        XLA_FFI_DataType_S8
        XLA_FFI_DataType_S16
        XLA_FFI_DataType_S32
        XLA_FFI_DataType_S64
        XLA_FFI_DataType_U8
        XLA_FFI_DataType_U16
        XLA_FFI_DataType_U32
        XLA_FFI_DataType_U64
        XLA_FFI_DataType_F16
        XLA_FFI_DataType_F32
        XLA_FFI_DataType_F64
        XLA_FFI_DataType_BF16
        XLA_FFI_DataType_C64
        XLA_FFI_DataType_C128

    ctypedef struct XLA_FFI_Buffer:
        size_t struct_size
        XLA_FFI_Extension_Base* extension_start
        XLA_FFI_DataType dtype
        void* data
        int64_t rank
        int64_t* dims

    ctypedef enum XLA_FFI_AttrType:
        XLA_FFI_AttrType_ARRAY
        XLA_FFI_AttrType_DICTIONARY
        XLA_FFI_AttrType_SCALAR
        XLA_FFI_AttrType_STRING

    ctypedef struct XLA_FFI_ByteSpan:
        const char* ptr
        size_t len

    ctypedef struct XLA_FFI_Scalar:
        XLA_FFI_DataType dtype
        void* value

    ctypedef struct XLA_FFI_Array:
        XLA_FFI_DataType dtype
        size_t size
        void* data

    ctypedef enum XLA_FFI_ExecutionStage:
        XLA_FFI_ExecutionStage_EXECUTE

    ctypedef struct XLA_FFI_Args:
        int64_t size
        void** args

    ctypedef struct XLA_FFI_Rets:
        int64_t size
        void** rets

    ctypedef struct XLA_FFI_Attrs:
        int64_t size
        XLA_FFI_AttrType* types
        XLA_FFI_ByteSpan** names
        void** attrs

    ctypedef struct XLA_FFI_Error_Destroy_Args:
        size_t struct_size
        XLA_FFI_Extension_Base* extension_start
        XLA_FFI_Error* error
    enum: XLA_FFI_Error_Destroy_Args_STRUCT_SIZE

    # an asynchronous handler's result (ext/overlap.pxi)
    ctypedef struct XLA_FFI_Future:
        pass

    ctypedef struct XLA_FFI_Future_Create_Args:
        size_t struct_size
        XLA_FFI_Extension_Base* extension_start
        XLA_FFI_Future* future
    enum: XLA_FFI_Future_Create_Args_STRUCT_SIZE

    ctypedef struct XLA_FFI_Future_SetAvailable_Args:
        size_t struct_size
        XLA_FFI_Extension_Base* extension_start
        XLA_FFI_Future* future
    enum: XLA_FFI_Future_SetAvailable_Args_STRUCT_SIZE

    ctypedef struct XLA_FFI_Future_SetError_Args:
        size_t struct_size
        XLA_FFI_Extension_Base* extension_start
        XLA_FFI_Future* future
        XLA_FFI_Error* error
    enum: XLA_FFI_Future_SetError_Args_STRUCT_SIZE

    ctypedef struct XLA_FFI_Api:
        size_t struct_size
        XLA_FFI_Error* (*XLA_FFI_Error_Create)(XLA_FFI_Error_Create_Args* args) noexcept nogil
        void (*XLA_FFI_Error_Destroy)(XLA_FFI_Error_Destroy_Args* args) noexcept nogil

    # the futures where this jaxlib keeps them (xla_ffi_c.h), never read from the struct directly
    int mpinb_future_shift
    bint mpinb_has_futures(const XLA_FFI_Api* api)
    XLA_FFI_Error* mpinb_future_create(const XLA_FFI_Api* api, XLA_FFI_Future_Create_Args* args)
    XLA_FFI_Error* mpinb_future_set_available(const XLA_FFI_Api* api, XLA_FFI_Future_SetAvailable_Args* args)
    XLA_FFI_Error* mpinb_future_set_error(const XLA_FFI_Api* api, XLA_FFI_Future_SetError_Args* args)

    ctypedef struct XLA_FFI_CallFrame:
        size_t struct_size
        XLA_FFI_Extension_Base* extension_start
        const XLA_FFI_Api* api
        XLA_FFI_ExecutionStage stage
        XLA_FFI_Args args
        XLA_FFI_Rets rets
        XLA_FFI_Attrs attrs
        XLA_FFI_Future* future   # out: set by an asynchronous handler

    ctypedef uint32_t XLA_FFI_Handler_Traits

    ctypedef struct XLA_FFI_Metadata:
        size_t struct_size
        XLA_FFI_Api_Version api_version
        XLA_FFI_Handler_Traits traits

    ctypedef struct XLA_FFI_Metadata_Extension:
        XLA_FFI_Extension_Base extension_base
        XLA_FFI_Metadata* metadata

    ctypedef XLA_FFI_Error* XLA_FFI_Handler(XLA_FFI_CallFrame* call_frame) noexcept nogil

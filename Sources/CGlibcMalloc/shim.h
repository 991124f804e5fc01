// glibc's allocator tuning (mallopt, malloc_trim), which the Glibc module does not expose.
#if defined(__linux__)
#include <features.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#endif

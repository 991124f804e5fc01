// glibc's allocator tuning, which the Glibc module does not expose: mallopt and malloc_trim,
// and getauxval, which says whether this is a privileged start (AT_SECURE), one in which glibc
// ignores the allocator's tunables.
#if defined(__linux__)
#include <features.h>
#if defined(__GLIBC__)
#include <malloc.h>
#include <sys/auxv.h>
#endif
#endif

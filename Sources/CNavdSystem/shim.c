// accept4 is a GNU extension: declared only with _GNU_SOURCE, which must precede every include.
#if defined(__linux__)
#define _GNU_SOURCE
#include <sys/socket.h>
#include "CNavdSystem.h"

int navd_accept4_nonblocking(int fd, struct sockaddr *address, socklen_t *length) {
    return accept4(fd, address, length, SOCK_NONBLOCK | SOCK_CLOEXEC);
}
#endif

// accept4 is a GNU extension: declared only with _GNU_SOURCE, which must precede every include.
#if defined(__linux__)
#define _GNU_SOURCE
#include <sys/socket.h>
#include <linux/filter.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include "CNavdSystem.h"

int navd_accept4_nonblocking(int fd, struct sockaddr *address, socklen_t *length) {
    return accept4(fd, address, length, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

int navd_drop_new_connections(int fd) {
    // One classic BPF instruction: accept 0 bytes of every packet, that is, drop it.
    struct sock_filter drop[] = { BPF_STMT(BPF_RET | BPF_K, 0) };
    struct sock_fprog program = { .len = 1, .filter = drop };
    return setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &program, sizeof program);
}

int navd_unacknowledged_bytes(int fd) {
    int bytes = 0;
    return ioctl(fd, SIOCOUTQ, &bytes) == 0 ? bytes : -1;
}
#endif

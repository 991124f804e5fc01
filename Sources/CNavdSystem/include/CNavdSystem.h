// Linux system calls the Glibc module leaves out (its module map has no sys/epoll.h or
// sys/eventfd.h, and accept4 needs _GNU_SOURCE). Constants and struct layouts come from the
// system headers themselves, so nothing is copied. Empty on other systems.
#ifndef CNAVDSYSTEM_H
#define CNAVDSYSTEM_H

#if defined(__linux__)
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

/// epoll's interest and readiness bits, typed as `events` is (the header's enum is not).
static const uint32_t navd_epoll_in = EPOLLIN;
static const uint32_t navd_epoll_out = EPOLLOUT;
static const uint32_t navd_epoll_err = EPOLLERR;
static const uint32_t navd_epoll_hup = EPOLLHUP;
static const uint32_t navd_epoll_rdhup = EPOLLRDHUP;
static const uint32_t navd_epoll_exclusive = EPOLLEXCLUSIVE;

static const int navd_epoll_ctl_add = EPOLL_CTL_ADD;
static const int navd_epoll_ctl_mod = EPOLL_CTL_MOD;
static const int navd_epoll_ctl_del = EPOLL_CTL_DEL;

static inline int navd_epoll_create1_cloexec(void) {
    return epoll_create1(EPOLL_CLOEXEC);
}

static inline int navd_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t token) {
    struct epoll_event event = { .events = events, .data = { .u64 = token } };
    return epoll_ctl(epfd, op, fd, &event);
}

static inline int navd_epoll_wait(int epfd, struct epoll_event *events, int capacity, int timeout) {
    return epoll_wait(epfd, events, capacity, timeout);
}

static inline uint32_t navd_epoll_event_events(const struct epoll_event *event) {
    return event->events;
}

static inline uint64_t navd_epoll_event_token(const struct epoll_event *event) {
    return event->data.u64;
}

/// A non-blocking, close-on-exec eventfd starting at zero.
static inline int navd_eventfd_nonblocking(void) {
    return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

/// accept4 with SOCK_NONBLOCK | SOCK_CLOEXEC; defined in shim.c, which sees _GNU_SOURCE.
/// The header leaves out <sys/socket.h>, which belongs to the Glibc module; hence the forward
/// declaration and `__socklen_t`, the type `socklen_t` names.
struct sockaddr;
int navd_accept4_nonblocking(int fd, struct sockaddr *address, __socklen_t *length);

/// Attaches a socket filter that drops every packet to the listening socket `fd`: SYNs of new
/// connections (their clients retry, then are refused once the socket closes) and the last ACK of
/// handshakes not yet complete. Connections already complete stay in the accept queue, to be
/// accepted and answered. 0 on success, -1 with errno.
int navd_drop_new_connections(int fd);

/// Bytes a socket holds that its peer has not acknowledged (SIOCOUTQ), or -1.
int navd_unacknowledged_bytes(int fd);
#endif

#endif

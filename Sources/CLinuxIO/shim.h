/* The Linux system calls Swift's Glibc module leaves out (epoll, eventfd, sendfile, accept4, prctl),
   for the HTTP engine's one wrapper (LarderHTTP/LinuxIO.swift). */
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/sendfile.h>
#include <sys/prctl.h>
#include <stdint.h>
#include <stddef.h>

/* Declared by <sys/socket.h> only under _GNU_SOURCE, which would make this module's system
   headers differ from the ones Glibc and Dispatch were built with; <sys/socket.h> itself stays
   out so its types remain Glibc's. The flags are SOCK_NONBLOCK | SOCK_CLOEXEC (Linux, all ABIs
   Swift runs on). */
extern int accept4(int fd, void *address, void *length, int flags);
#define LARDER_ACCEPT_FLAGS (04000 | 02000000)

/* epoll_event is packed on x86-64; Swift sees it, but setting the union is clearer in C. */
static inline int larder_epoll_add(int epfd, int fd, uint32_t events, uint64_t data) {
  struct epoll_event ev = {.events = events, .data.u64 = data};
  return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
}
static inline int larder_epoll_del(int epfd, int fd) { return epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL); }
/* Waits; writes up to `max` (events, data) pairs into the two arrays. */
static inline int larder_epoll_wait(int epfd, uint32_t *events, uint64_t *data, int max, int timeout) {
  struct epoll_event ev[256];
  if (max > 256) max = 256;
  int n = epoll_wait(epfd, ev, max, timeout);
  for (int i = 0; i < n; i++) { events[i] = ev[i].events; data[i] = ev[i].data.u64; }
  return n;
}
static inline int larder_accept(int fd) { return accept4(fd, NULL, NULL, LARDER_ACCEPT_FLAGS); }
static inline int larder_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }
static inline int larder_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }
/* Names the calling thread for the kernel (top -H, perf, /proc/PID/task/TID/comm; 15 bytes). */
static inline void larder_name_thread(const char *name) { prctl(PR_SET_NAME, name, 0, 0, 0); }
static const uint32_t larder_EPOLLIN = EPOLLIN, larder_EPOLLOUT = EPOLLOUT, larder_EPOLLET = EPOLLET,
  larder_EPOLLRDHUP = EPOLLRDHUP, larder_EPOLLHUP = EPOLLHUP, larder_EPOLLERR = EPOLLERR,
  larder_EPOLLEXCLUSIVE = EPOLLEXCLUSIVE;

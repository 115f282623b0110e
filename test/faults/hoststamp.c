/*
 * hoststamp.c - does the kernel stamp every packet of this host on arrival?
 *
 * A socket that asks for receive stamps (SO_TIMESTAMPNS, or
 * SO_TIMESTAMPING with SOF_TIMESTAMPING_RX_SOFTWARE) turns on a host-wide
 * switch: from then on every packet arriving on the host is stamped (a
 * clock read each), whichever socket it is for.  This probe asks for none
 * itself: its socket only reports a software stamp a packet already has
 * (SOF_TIMESTAMPING_SOFTWARE alone), so a stamp on its own loopback
 * datagram shows that some socket of the host holds the switch.
 *
 * Usage: hoststamp SECONDS [INTERVAL_MS]
 * Sends itself a datagram every INTERVAL_MS (default 5) for SECONDS, or
 * until SIGTERM, and prints "hoststamp: N of M samples stamped".  Exits 0,
 * or 1 on an error.
 */
#include <arpa/inet.h>
#include <linux/errqueue.h>
#include <linux/net_tstamp.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
    (void) sig;
    stop = 1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

/* One datagram to ourselves: 1 if it came with a software stamp, 0 if
 * not, -1 on an error */
static int sample(int fd, const struct sockaddr_in *self)
{
    char byte = 's';
    if (sendto(fd, &byte, 1, 0, (const struct sockaddr *) self, sizeof(*self)) != 1) {
        perror("hoststamp: sendto");
        return -1;
    }
    char buf[16];
    union {
        char space[CMSG_SPACE(sizeof(struct scm_timestamping))];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.space, .msg_controllen = sizeof(ctl.space)};
    if (recvmsg(fd, &mh, 0) < 0) {
        perror("hoststamp: recvmsg");
        return -1;
    }
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); NULL != cm; cm = CMSG_NXTHDR(&mh, cm)) {
        if (SOL_SOCKET == cm->cmsg_level && SCM_TIMESTAMPING == cm->cmsg_type &&
            cm->cmsg_len >= CMSG_LEN(sizeof(struct scm_timestamping))) {
            struct scm_timestamping st; /* ts[0] the software stamp */
            memcpy(&st, CMSG_DATA(cm), sizeof(st));
            return (0 != st.ts[0].tv_sec || 0 != st.ts[0].tv_nsec) ? 1 : 0;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s SECONDS [INTERVAL_MS]\n", argv[0]);
        return 1;
    }
    double seconds = atof(argv[1]);
    int interval_ms = (argc > 2) ? atoi(argv[2]) : 5;
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in self = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(self);
    int report_only = SOF_TIMESTAMPING_SOFTWARE;
    if (fd < 0 || 0 != bind(fd, (struct sockaddr *) &self, sizeof(self)) ||
        0 != getsockname(fd, (struct sockaddr *) &self, &len) ||
        0 != setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING, &report_only, sizeof(report_only))) {
        perror("hoststamp: socket");
        return 1;
    }
    signal(SIGTERM, on_term);
    long stamped = 0, samples = 0;
    double end = now_s() + seconds;
    do {
        int s = sample(fd, &self);
        if (s < 0) {
            return 1;
        }
        stamped += s;
        ++samples;
        usleep((useconds_t) interval_ms * 1000u);
    } while (!stop && now_s() < end);
    printf("hoststamp: %ld of %ld samples stamped\n", stamped, samples);
    close(fd);
    return 0;
}

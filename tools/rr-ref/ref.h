/*
 * ref.h: what the C references share (rr.c here, ../crr-ref/crr.c): the
 * clock, exact reads and writes of a TCP stream, and the server's listening
 * socket and accept. Each reference includes it and still builds as one
 * file (cc -O2 -o rr rr.c).
 */
#ifndef VNETLAB_REF_H
#define VNETLAB_REF_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* io: send or receive exactly n bytes of a TCP stream, again after EINTR; 0 on success. */
static int io(int fd, char *b, size_t n, int sending)
{
	size_t done = 0;
	while (done < n) {
		ssize_t r = sending ? send(fd, b + done, n - done, MSG_NOSIGNAL)
				    : recv(fd, b + done, n - done, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		done += r;
	}
	return 0;
}

/* ref_listen: a socket of type (SOCK_STREAM or SOCK_DGRAM) bound to port
 * on every IPv4 address, listening when a stream; then it prints "NAME-ref
 * ready", what the benchmark waits for. -1 on failure, said as "NAME
 * server: ...". */
static int ref_listen(const char *name, int type, int port)
{
	int one = 1;
	int lfd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(lfd, (struct sockaddr *)&sa, sizeof sa) || (type == SOCK_STREAM && listen(lfd, SOMAXCONN))) {
		fprintf(stderr, "%s server: bind/listen: %s\n", name, strerror(errno));
		return -1;
	}
	printf("%s-ref ready\n", name);
	fflush(stdout);
	return lfd;
}

/* ref_accept: the next connection on lfd, again after EINTR and
 * ECONNABORTED; -1 on failure, said as "NAME server: accept: ...". */
static int ref_accept(const char *name, int lfd)
{
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd >= 0)
			return fd;
		if (errno != EINTR && errno != ECONNABORTED) {
			fprintf(stderr, "%s server: accept: %s\n", name, strerror(errno));
			return -1;
		}
	}
}

#endif

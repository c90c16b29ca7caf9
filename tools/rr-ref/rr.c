/*
 * rr: a minimal C TCP_RR and UDP_RR client and server, the reference the
 * built-in rr engine's tcp_rr and udp_rr are measured against
 * (scripts/bench-engine.sh). The loop is netperf's: one connection (TCP,
 * TCP_NODELAY on both sides) or one connected UDP socket, a blocking send
 * of SIZE bytes, blocking receives until SIZE bytes (UDP: one datagram)
 * came back, repeat; a timer signal ends the run (no clock read per
 * transaction, as netperf without histograms). The server answers every
 * request with SIZE bytes (UDP: to the datagram's sender), netserver's
 * loop. Nothing else: no timeouts (a dead server or a lost datagram hangs
 * it; the benchmark kills it), no latency histogram. It is the floor of
 * what such a loop costs.
 *
 *   rr server tcp|udp PORT SIZE             prints "rr-ref ready" once listening
 *   rr client tcp|udp IP PORT SIZE SECONDS  prints "transactions N seconds S rate R"
 *
 * Build: cc -O2 -o rr rr.c (it includes ref.h, beside it)
 */
#define _GNU_SOURCE
#include <netinet/tcp.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/time.h>

#include "ref.h"

static volatile sig_atomic_t times_up;

static void on_alarm(int sig)
{
	(void)sig;
	times_up = 1;
}

static int server(int udp, int port, size_t size)
{
	char *buf = malloc(size);
	int one = 1;
	int lfd = ref_listen("rr", udp ? SOCK_DGRAM : SOCK_STREAM, port);
	if (lfd < 0)
		return 1;
	if (udp) {
		for (;;) {
			struct sockaddr_storage from;
			socklen_t fl = sizeof from;
			ssize_t n = recvfrom(lfd, buf, size, 0, (struct sockaddr *)&from, &fl);
			if (n >= 0)
				sendto(lfd, buf, n, 0, (struct sockaddr *)&from, fl);
		}
	}
	for (;;) {
		int fd = ref_accept("rr", lfd);
		if (fd < 0)
			return 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		while (io(fd, buf, size, 0) == 0 && io(fd, buf, size, 1) == 0)
			;
		close(fd);
	}
}

static int client(int udp, const char *ip, int port, size_t size, double secs)
{
	char *buf = calloc(1, size);
	int one = 1;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	struct sigaction act = {.sa_handler = on_alarm, .sa_flags = SA_RESTART};
	struct itimerval it = {.it_value = {.tv_sec = (time_t)secs, .tv_usec = (secs - (time_t)secs) * 1e6}};
	unsigned long n = 0;
	double start;
	int fd;
	if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1) {
		fprintf(stderr, "rr client: %s is not an IPv4 address\n", ip);
		return 1;
	}
	fd = socket(AF_INET, (udp ? SOCK_DGRAM : SOCK_STREAM) | SOCK_CLOEXEC, 0);
	if (!udp)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
		perror("rr client: connect");
		return 1;
	}
	sigaction(SIGALRM, &act, NULL);
	start = now();
	setitimer(ITIMER_REAL, &it, NULL);
	while (!times_up) {
		if (udp) {
			ssize_t r;
			while ((r = send(fd, buf, size, 0)) < 0 && errno == EINTR)
				;
			while (r >= 0 && (r = recv(fd, buf, size, 0)) < 0 && errno == EINTR)
				;
			if (r < 0) {
				perror("rr client: send/recv");
				return 1;
			}
		} else if (io(fd, buf, size, 1) || io(fd, buf, size, 0)) {
			fprintf(stderr, "rr client: the connection ended after %lu transactions\n", n);
			return 1;
		}
		n++;
	}
	secs = now() - start;
	printf("transactions %lu seconds %.6f rate %.1f\n", n, secs, n / secs);
	return 0;
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	if (argc >= 3 && strcmp(argv[2], "tcp") && strcmp(argv[2], "udp"))
		argc = 0;
	if (argc == 5 && !strcmp(argv[1], "server"))
		return server(!strcmp(argv[2], "udp"), atoi(argv[3]), (size_t)atoi(argv[4]));
	if (argc == 7 && !strcmp(argv[1], "client"))
		return client(!strcmp(argv[2], "udp"), argv[3], atoi(argv[4]), (size_t)atoi(argv[5]), atof(argv[6]));
	fprintf(stderr, "usage: rr server tcp|udp PORT SIZE | rr client tcp|udp IP PORT SIZE SECONDS\n");
	return 2;
}

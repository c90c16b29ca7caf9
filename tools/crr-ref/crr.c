/*
 * crr: a minimal C TCP_CRR client and server, the reference the built-in
 * rr engine's tcp_crr is measured against (scripts/bench-engine.sh).
 * Per connection it puts on the wire what `vnetlab rr-client --mode crr`
 * does: socket, SO_LINGER {1, 0} (close sends RST: no TIME_WAIT, as
 * vnetlab), connect, send SIZE bytes, read SIZE bytes, close. Nothing
 * else: no timeouts (a dead server hangs it; the benchmark kills it), no
 * latency histogram. It is the floor of what such a loop costs.
 *
 *   crr server PORT SIZE              prints "crr-ref ready" once listening
 *   crr client IP PORT SIZE SECONDS   prints "transactions N seconds S rate R errors E"
 *
 * Build: cc -O2 -o crr crr.c (it includes ../rr-ref/ref.h)
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdlib.h>

#include "../rr-ref/ref.h"

static int server(int port, size_t size)
{
	char *buf = malloc(size);
	int lfd = ref_listen("crr", SOCK_STREAM, port);
	if (lfd < 0)
		return 1;
	for (;;) {
		int fd = ref_accept("crr", lfd);
		if (fd < 0)
			return 1;
		/* Answer until the client resets: the server never closes first. */
		while (io(fd, buf, size, 0) == 0 && io(fd, buf, size, 1) == 0)
			;
		close(fd);
	}
}

static int client(const char *ip, int port, size_t size, double secs)
{
	char *buf = calloc(1, size);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	struct linger lg = {.l_onoff = 1, .l_linger = 0};
	unsigned long n = 0, errors = 0;
	double start, end, t;
	if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1) {
		fprintf(stderr, "crr client: %s is not an IPv4 address\n", ip);
		return 1;
	}
	start = now();
	end = start + secs;
	do {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		int ok = fd >= 0 && !setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
		if (ok) {
			int r;
			while ((r = connect(fd, (struct sockaddr *)&sa, sizeof sa)) < 0 && errno == EINTR)
				;
			ok = r == 0 && io(fd, buf, size, 1) == 0 && io(fd, buf, size, 0) == 0;
		}
		if (ok)
			n++;
		else
			errors++;
		if (fd >= 0)
			close(fd);
		t = now();
	} while (t < end);
	printf("transactions %lu seconds %.6f rate %.1f errors %lu\n", n, t - start, n / (t - start), errors);
	return errors ? 1 : 0;
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	if (argc == 4 && !strcmp(argv[1], "server"))
		return server(atoi(argv[2]), (size_t)atoi(argv[3]));
	if (argc == 6 && !strcmp(argv[1], "client"))
		return client(argv[2], atoi(argv[3]), (size_t)atoi(argv[4]), atof(argv[5]));
	fprintf(stderr, "usage: crr server PORT SIZE | crr client IP PORT SIZE SECONDS\n");
	return 2;
}

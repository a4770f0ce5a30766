/*
 * rsecho: a plain BSD-sockets echo server and checking client, for the
 * rsocket interop tests (tests/rxe/interop_rsocket_test.go). It knows
 * nothing of RDMA: the tests run it under LD_PRELOAD=librspreload.so, which
 * turns its sockets into rsockets.
 *
 *   rsecho server ADDR PORT
 *	serve one connection: echo every byte until the peer shuts down its
 *	writing side, then shut down ours, close, print "echoed N bytes"
 *   rsecho client ADDR PORT TOTAL CHUNK
 *	send TOTAL bytes of the pattern in writes of at most CHUNK bytes,
 *	then shut down writing, while reading the echo and checking every
 *	byte, then EOF right after TOTAL; print "verified N bytes"
 *
 * Byte i of each stream is i % 251: a prime, so that no write or buffer
 * size lines up with the pattern's period. Exits 0 on success, 1 with a
 * message on stderr otherwise.
 *
 * Only socket, bind, listen, accept, connect, send, recv (MSG_DONTWAIT
 * for non-blocking), poll, shutdown and close: the calls librspreload has
 * intercepted since its first release (no SOCK_CLOEXEC, accept4 or
 * fcntl, which it took up later).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#define PERIOD 251

static void die(const char *what)
{
	fprintf(stderr, "rsecho: %s: %s\n", what, strerror(errno));
	exit(1);
}

static struct sockaddr_in parse_addr(const char *ip, const char *port)
{
	struct sockaddr_in sin;

	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_port = htons((unsigned short)atoi(port));
	if (inet_pton(AF_INET, ip, &sin.sin_addr) != 1) {
		fprintf(stderr, "rsecho: %s is not an IPv4 address\n", ip);
		exit(1);
	}
	return sin;
}

static void send_all(int fd, const unsigned char *p, size_t n)
{
	while (n > 0) {
		ssize_t k = send(fd, p, n, 0);

		if (k < 0) {
			if (errno == EINTR)
				continue;
			die("send");
		}
		p += k;
		n -= (size_t)k;
	}
}

static int serve(const char *ip, const char *port)
{
	struct sockaddr_in sin = parse_addr(ip, port);
	static unsigned char buf[1 << 16];
	long long total = 0;
	int lfd, fd;
	ssize_t n;

	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0)
		die("socket");
	if (bind(lfd, (struct sockaddr *)&sin, sizeof sin))
		die("bind");
	if (listen(lfd, 1))
		die("listen");
	printf("listening on %s:%s\n", ip, port);
	fflush(stdout);
	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		die("accept");
	while ((n = recv(fd, buf, sizeof buf, 0)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("recv");
		}
		send_all(fd, buf, (size_t)n);
		total += n;
	}
	if (shutdown(fd, SHUT_WR))
		die("shutdown");
	close(fd);
	close(lfd);
	printf("echoed %lld bytes\n", total);
	return 0;
}

/*
 * client sends and reads in one thread, with poll and MSG_DONTWAIT: the
 * echo comes back while the pattern goes out, so neither side's buffer
 * must hold a whole write. (Blocking send and recv on two threads of one
 * rsocket stalled under rdma-core 44.0's librspreload once a write was
 * larger than the buffers.)
 */
static int client(const char *ip, const char *port, long long total, size_t chunk)
{
	struct sockaddr_in sin = parse_addr(ip, port);
	static unsigned char in[1 << 16];
	unsigned char *out = malloc(chunk);
	long long sent = 0, got = 0;
	size_t out_len = 0, out_off = 0;
	int fd, eof = 0, shut = 0;

	if (!out)
		die("malloc");
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		die("socket");
	if (connect(fd, (struct sockaddr *)&sin, sizeof sin))
		die("connect");
	while (!eof) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t n, i;

		if (out_off == out_len && sent < total) {
			out_len = chunk;
			if ((long long)out_len > total - sent)
				out_len = (size_t)(total - sent);
			for (i = 0; i < (ssize_t)out_len; i++)
				out[i] = (unsigned char)((sent + i) % PERIOD);
			out_off = 0;
		}
		if (out_off < out_len)
			pfd.events |= POLLOUT;
		else if (!shut) {
			if (shutdown(fd, SHUT_WR))
				die("shutdown");
			shut = 1;
		}
		if (poll(&pfd, 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			die("poll");
		}
		if (out_off < out_len && (pfd.revents & (POLLOUT | POLLERR | POLLHUP))) {
			n = send(fd, out + out_off, out_len - out_off, MSG_DONTWAIT);
			if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				die("send");
			if (n > 0) {
				out_off += (size_t)n;
				sent += n;
			}
		}
		if (!(pfd.revents & (POLLIN | POLLERR | POLLHUP)))
			continue;
		n = recv(fd, in, sizeof in, MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				continue;
			die("recv");
		}
		if (n == 0)
			eof = 1;
		for (i = 0; i < n; i++) {
			unsigned char want = (unsigned char)((got + i) % PERIOD);

			if (got + i >= sent) {
				fprintf(stderr, "rsecho: byte %lld came back before it was sent (%lld sent)\n", got + i, sent);
				return 1;
			}
			if (in[i] != want) {
				fprintf(stderr, "rsecho: byte %lld is %u, want %u\n", got + i, in[i], want);
				return 1;
			}
		}
		got += n;
	}
	close(fd);
	free(out);
	if (got != total) {
		fprintf(stderr, "rsecho: end of stream after %lld bytes of %lld\n", got, total);
		return 1;
	}
	printf("verified %lld bytes\n", got);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "server"))
		return serve(argv[2], argv[3]);
	if (argc == 6 && !strcmp(argv[1], "client") && atoll(argv[4]) >= 0 && atoi(argv[5]) > 0)
		return client(argv[2], argv[3], atoll(argv[4]), (size_t)atoi(argv[5]));
	fprintf(stderr, "usage: rsecho server ADDR PORT | rsecho client ADDR PORT TOTAL CHUNK\n");
	return 2;
}

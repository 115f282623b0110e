/*
 * join.c - MPI_Comm_join over a connected TCP socket between the single
 * processes of two jobs started by separate mpiruns, over the usnic BTL.
 *
 *   join server PORTFILE   listens on 127.0.0.1, an ephemeral port, writes
 *                          the port number to PORTFILE (atomically), accepts
 *                          one connection (60 s limit)
 *   join client PORTFILE   waits up to 60 s for PORTFILE, connects
 *
 * Both call MPI_Comm_join on the socket, then dyn_exchange() and
 * dyn_collectives() (dyn.h, server = side 0) and MPI_Comm_disconnect.
 * Prints "PASS join-<role>".
 */
#define TEST_NAME "join"
#include "dyn.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
    int size;
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
    if (argc != 3 || size != 1)
        fail("usage: join server|client PORTFILE, one rank per job");
    int server = 0 == strcmp(argv[1], "server");
    const char *file = argv[2];
    struct sockaddr_in sa;
    socklen_t salen = sizeof(sa);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd;

    if (server) {
        int ls = socket(AF_INET, SOCK_STREAM, 0);
        if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
            listen(ls, 1) != 0 ||
            getsockname(ls, (struct sockaddr *)&sa, &salen) != 0)
            fail("cannot listen on 127.0.0.1");
        char tmp[4096];
        snprintf(tmp, sizeof(tmp), "%s.tmp", file);
        FILE *f = fopen(tmp, "w");
        if (!f || fprintf(f, "%d\n", ntohs(sa.sin_port)) < 0 ||
            fclose(f) != 0 || rename(tmp, file) != 0)
            fail("cannot write %s", file);
        struct pollfd p = {.fd = ls, .events = POLLIN};
        if (poll(&p, 1, 60000) != 1)
            fail("nobody connected within 60 s");
        fd = accept(ls, NULL, NULL);
        if (fd < 0)
            fail("accept failed");
        close(ls);
    } else {
        FILE *f = NULL;
        int port = 0;
        for (int i = 0; i < 6000 && !(f = fopen(file, "r")); i++)
            usleep(10000);
        if (!f || fscanf(f, "%d", &port) != 1)
            fail("no port in %s after 60 s", file);
        fclose(f);
        sa.sin_port = htons((uint16_t)port);
        fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
            fail("cannot connect to 127.0.0.1:%d", port);
    }
    MPI_Comm inter;
    CHECK_MPI(MPI_Comm_join(fd, &inter));
    if (inter == MPI_COMM_NULL)
        fail("MPI_Comm_join returned MPI_COMM_NULL");
    MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
    int rsize;
    CHECK_MPI(MPI_Comm_remote_size(inter, &rsize));
    if (rsize != 1)
        fail("joined intercommunicator has %d remote ranks", rsize);
    dyn_info("%s joined", argv[1]);
    dyn_exchange(inter, !server, 0);
    dyn_collectives(inter, !server, 0);
    CHECK_MPI(MPI_Comm_disconnect(&inter));
    close(fd);
    printf("PASS join-%s\n", argv[1]);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}

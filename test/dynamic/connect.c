/*
 * connect.c - MPI_Comm_accept / MPI_Comm_connect between two jobs started
 * by separate mpiruns, over the usnic BTL.
 *
 *   connect server PORTFILE   rank 0 opens a port and writes its name to
 *                             PORTFILE (atomically: PORTFILE.tmp, rename);
 *                             all ranks accept
 *   connect client PORTFILE   rank 0 waits up to 60 s for PORTFILE; all
 *                             ranks connect
 *
 * Then dyn_exchange() and dyn_collectives() (dyn.h, server = side 0) and
 * MPI_Comm_disconnect.  Rank 0 prints "PASS connect-<role>".
 */
#define TEST_NAME "connect"
#include "dyn.h"

#include <time.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
    if (argc != 3)
        fail("usage: connect server|client PORTFILE");
    int server = 0 == strcmp(argv[1], "server");
    const char *file = argv[2];
    char port[MPI_MAX_PORT_NAME + 1] = "";
    MPI_Comm inter;
    int size, rsize;
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));

    if (server) {
        if (my_rank == 0) {
            char tmp[4096];
            CHECK_MPI(MPI_Open_port(MPI_INFO_NULL, port));
            snprintf(tmp, sizeof(tmp), "%s.tmp", file);
            FILE *f = fopen(tmp, "w");
            if (!f || fprintf(f, "%s\n", port) < 0 || fclose(f) != 0 ||
                rename(tmp, file) != 0)
                fail("cannot write %s", file);
            dyn_info("port %s", port);
        }
        CHECK_MPI(MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD,
                                  &inter));
    } else {
        if (my_rank == 0) {
            FILE *f = NULL;
            for (int i = 0; i < 6000 && !(f = fopen(file, "r")); i++)
                usleep(10000);
            if (!f)
                fail("no port file %s after 60 s", file);
            if (!fgets(port, sizeof(port), f))
                fail("empty port file %s", file);
            fclose(f);
            port[strcspn(port, "\n")] = 0;
        }
        CHECK_MPI(MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD,
                                   &inter));
    }
    MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
    CHECK_MPI(MPI_Comm_remote_size(inter, &rsize));
    if (my_rank == 0)
        dyn_info("%s: %d local, %d remote ranks", argv[1], size, rsize);
    dyn_exchange(inter, !server, 0);
    dyn_collectives(inter, !server, 0);
    CHECK_MPI(MPI_Comm_disconnect(&inter));
    if (server && my_rank == 0)
        CHECK_MPI(MPI_Close_port(port));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (my_rank == 0) {
        printf("PASS connect-%s\n", argv[1]);
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}

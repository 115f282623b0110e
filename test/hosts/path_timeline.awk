# path_timeline.awk - what a path_stream run (test/hosts/path_stream.c)
# did around a change of the path, from its --times files:
#
#   awk -v ready=T0 -v on=T_ON -v off=T_OFF -v size=BYTES \
#       -f path_timeline.awk PREFIX.r1 PREFIX.r0
#
# T0: the stream's start (the --ready file); T_ON: when the black hole
# was put on the path; T_OFF: when it was lifted (0: never).  Prints one
# line of key=value (times in ms, goodput in MB/s = 10^6 bytes/s):
#   messages        messages verified in all
#   stall_ms        the longest gap between two verified messages that
#                   began within the first second of the black hole
#                   (-v rwin=S: S seconds) and ended while it was on:
#                   the stall the hole caused (later gaps, e.g. of a busy
#                   VM, are left out)
#   recover_ms      from T_ON to the first message verified after rank 0
#                   lowered its datagram size (the stream runs again on
#                   the smaller size); without a lowering, to the end of
#                   the stall (-1: no message arrived while the hole was
#                   on)
#   lowered_ms      from T_ON to the first rise of rank 0's pmtu_lowered
#                   counter (-1: none)
#   raised_ms       from T_OFF to the last rise of rank 0's pmtu_raised
#                   counter (-1: none after T_OFF, or T_OFF = 0): when
#                   the size ends at the pair's limit, the time it took
#                   to get there (a search may pass smaller sizes first)
#   gp_before       goodput from T0 + 0.5 s to T_ON
#   gp_recovery     goodput from T_ON to T_ON + recover_ms
#   gp_holed        goodput from there to T_OFF (settled below the hole)
#   gp_lifted       goodput from T_OFF to that last raise (or to the end)
#   gp_raised       goodput from the raise to the last message
#   gp_window       goodput over the first WIN s of the black hole
#                   (-v win=S, default 0.25): the stall and the fall back
#                   included
# (a phase shorter than 50 ms prints "-")
function gp(n, secs) { return secs >= 0.05 ? sprintf("%.0f", n * size / secs / 1e6) : "-" }
$1 == "m" { t[++n] = $3 + 0; next }
$1 == "e" && $2 == 0 && $3 == "pmtu_lowered" && $5 > on && low == 0 && seen_low { low = $5 }
$1 == "e" && $2 == 0 && $3 == "pmtu_lowered" { seen_low = 1 }
$1 == "e" && $2 == 0 && $3 == "pmtu_raised" && off > 0 && $5 > off && seen_rai { rai = $5 }
$1 == "e" && $2 == 0 && $3 == "pmtu_raised" { seen_rai = 1 }
END {
    hole_end = off > 0 ? off : (n ? t[n] : on)
    if (rwin == "") rwin = 1
    prev = 0; maxgap = -1; gap_end = 0
    for (i = 1; i <= n; i++) {
        if (t[i] <= on) { prev = t[i]; continue }
        if (t[i] > hole_end) break
        start = prev > on ? prev : on
        g = t[i] - start
        if (start <= on + rwin && g > maxgap) { maxgap = g; gap_end = t[i] }
        prev = t[i]
    }
    rec = maxgap >= 0 ? gap_end - on : -1
    if (low > 0)
        for (i = 1; i <= n; i++)
            if (t[i] > low && t[i] <= hole_end) { rec = t[i] - on; break }
    if (win == "") win = 0.25
    c_before = c_rec = c_holed = c_lifted = c_raised = c_win = 0
    last = n ? t[n] : 0
    for (i = 1; i <= n; i++) {
        if (t[i] > on && t[i] <= on + win) c_win++
        if (t[i] >= ready + 0.5 && t[i] < on) c_before++
        else if (t[i] >= on && rec >= 0 && t[i] <= on + rec) c_rec++
        else if (t[i] > on && t[i] <= hole_end) c_holed++
        else if (off > 0 && t[i] > off && (rai == 0 || t[i] <= rai)) c_lifted++
        else if (rai > 0 && t[i] > rai) c_raised++
    }
    printf("messages=%d stall_ms=%.1f recover_ms=%.1f lowered_ms=%.1f raised_ms=%.1f", n,
        (maxgap >= 0 ? maxgap * 1000 : -1), (rec >= 0 ? rec * 1000 : -1),
        (low ? (low - on) * 1000 : -1), (rai ? (rai - off) * 1000 : -1))
    printf(" gp_before=%s gp_recovery=%s gp_holed=%s gp_lifted=%s gp_raised=%s",
        gp(c_before, on - ready - 0.5), (rec >= 0 ? gp(c_rec, rec) : "-"),
        (rec >= 0 ? gp(c_holed, hole_end - on - rec) : "-"),
        (off > 0 ? gp(c_lifted, (rai ? rai : last) - off) : "-"), (rai ? gp(c_raised, last - rai) : "-"))
    printf(" gp_window=%s\n", gp(c_win, win))
}

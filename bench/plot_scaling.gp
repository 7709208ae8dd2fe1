# Projected scaling efficiency vs nodes (docs/scaling.png) from the .dat files that
# bench/scaling_project.py writes: ResNet-50 and VGG-16 with a P100-like compute step, one rank
# per node, ring all-reduce overlapped with backward in fp32 (solid) and fp16 (dashed) at
# 10/25/100 Gbit/s, with dtnn's default 4 MiB buckets (left) and 64 MiB buckets (right), and
# the published points of ChainerMN and Horovod (their GPUs per node and networks differ: see
# docs/scaling.md). Run from the repository root: gnuplot bench/plot_scaling.gp
set terminal pngcairo size 1300,900 font "DejaVu Sans,10"
set output "docs/scaling.png"
set multiplot layout 2,2
set logscale x 2
set xrange [8:1024]
set yrange [0:105]
set xlabel "nodes (one GPU-like rank each)"
set ylabel "projected efficiency (%)"
set grid
set key bottom left font ",9"
d = "docs/scaling-data/"
# .dat columns: nodes, then per rate 10, 25, 100 Gbit/s: ring-ovl fp32, ring-ovl fp16,
# ring-blk fp32, hier-blk fp32.
do for [m in "resnet50 vgg16"] {
    do for [mb in "4 64"] {
        f = d."projection-".m."-1rpn-".mb."mb.dat"
        set title sprintf("%s, batch 32, %s ms compute step, %s MiB buckets (model)", m, \
                          m eq "resnet50" ? "145" : "210", mb)
        if (m eq "resnet50") {
            plot f u 1:2 w lp lc 1 pt 7 t "10 Gbit/s fp32", "" u 1:3 w l lc 1 dt 2 t "10 Gbit/s fp16", \
                 "" u 1:6 w lp lc 2 pt 7 t "25 Gbit/s fp32", "" u 1:7 w l lc 2 dt 2 t "25 Gbit/s fp16", \
                 "" u 1:10 w lp lc 3 pt 7 t "100 Gbit/s fp32", "" u 1:11 w l lc 3 dt 2 t "100 Gbit/s fp16", \
                 "+" u (128):(90) every ::0::0 w p pt 5 ps 1.6 lc rgb "black" \
                     t "ChainerMN: 90% at 128 GPUs (ResNet-50)", \
                 "+" u (512):(90) every ::0::0 w p pt 9 ps 1.8 lc rgb "black" \
                     t "Horovod: about 90% at 512 GPUs (ResNet-101)"
        } else {
            plot f u 1:2 w lp lc 1 pt 7 t "10 Gbit/s fp32", "" u 1:3 w l lc 1 dt 2 t "10 Gbit/s fp16", \
                 "" u 1:6 w lp lc 2 pt 7 t "25 Gbit/s fp32", "" u 1:7 w l lc 2 dt 2 t "25 Gbit/s fp16", \
                 "" u 1:10 w lp lc 3 pt 7 t "100 Gbit/s fp32", "" u 1:11 w l lc 3 dt 2 t "100 Gbit/s fp16", \
                 "+" u (512):(68) every ::0::0 w p pt 9 ps 1.8 lc rgb "black" \
                     t "Horovod: 68% at 512 GPUs (VGG-16)"
        }
    }
}
unset multiplot

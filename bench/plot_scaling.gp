# Projected scaling efficiency vs nodes (docs/scaling.png) from the .dat files that
# bench/scaling_project.py writes: ResNet-50 and VGG-16 with a P100-like step time, ring
# all-reduce overlapped with backward in fp32 (solid) and fp16 (dashed), at 10/25/100 Gbit/s,
# with the published points of ChainerMN and Horovod for comparison (their networks differ:
# see docs/scaling.md). Run from the repository root: gnuplot bench/plot_scaling.gp
set terminal pngcairo size 1200,520 font "DejaVu Sans,11"
set output "docs/scaling.png"
set multiplot layout 1,2
set logscale x 2
set xrange [8:1024]
set yrange [0:105]
set xlabel "nodes (1 GPU-like rank each)"
set ylabel "projected scaling efficiency (%)"
set grid
set key bottom left
d = "docs/scaling-data/"
# Columns: nodes, then per rate (10, 25, 100 Gbit/s): ring-overlap fp32, fp16, hierarchical fp32.
set title "ResNet-50, batch 32, 145 ms compute step (dtnn alpha-beta model)"
plot d."projection-resnet50-p100.dat" u 1:2 w lp lc 1 pt 7 t "10 Gbit/s fp32", \
     "" u 1:3 w l lc 1 dt 2 t "10 Gbit/s fp16", \
     "" u 1:5 w lp lc 2 pt 7 t "25 Gbit/s fp32", \
     "" u 1:6 w l lc 2 dt 2 t "25 Gbit/s fp16", \
     "" u 1:8 w lp lc 3 pt 7 t "100 Gbit/s fp32", \
     "" u 1:9 w l lc 3 dt 2 t "100 Gbit/s fp16", \
     "-" u 1:2 w p pt 5 ps 1.6 lc rgb "black" t "ChainerMN, 128 GPUs (ResNet-50, InfiniBand)", \
     "-" u 1:2 w p pt 9 ps 1.8 lc rgb "black" t "Horovod, 512 GPUs (ResNet-101)"
128 90
e
512 90
e
set title "VGG-16, batch 32, 210 ms compute step (dtnn alpha-beta model)"
plot d."projection-vgg16-p100.dat" u 1:2 w lp lc 1 pt 7 t "10 Gbit/s fp32", \
     "" u 1:3 w l lc 1 dt 2 t "10 Gbit/s fp16", \
     "" u 1:5 w lp lc 2 pt 7 t "25 Gbit/s fp32", \
     "" u 1:6 w l lc 2 dt 2 t "25 Gbit/s fp16", \
     "" u 1:8 w lp lc 3 pt 7 t "100 Gbit/s fp32", \
     "" u 1:9 w l lc 3 dt 2 t "100 Gbit/s fp16", \
     "-" u 1:2 w p pt 9 ps 1.8 lc rgb "black" t "Horovod, 512 GPUs (VGG-16)"
512 68
e
unset multiplot

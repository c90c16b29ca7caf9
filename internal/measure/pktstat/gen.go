package pktstat

// The generated pktsize_bpfel.go and pktsize_bpfel.o are committed: building
// vnetlab needs no clang. Regenerate after changing bpf/pktsize.c (clang 14
// and libbpf-dev): go generate ./internal/measure/pktstat
//go:generate go tool bpf2go -tags linux -target bpfel -type pkt_key -type pkt_count pktsize ../../../bpf/pktsize.c -- -O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu

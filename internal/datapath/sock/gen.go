package sock

// The generated sock_bpfel.go and sock_bpfel.o are committed: building
// vnetlab needs no clang. Regenerate after changing bpf/sock.c or bpf/lb.h
// (clang 14 and libbpf-dev): go generate ./internal/datapath/sock
//go:generate go tool bpf2go -tags linux -target bpfel -type sock_rev_key -type sock_rev_val sock ../../../bpf/sock.c -- -O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu

package polbpf

// The generated policy_bpfel.go and policy_bpfel.o are committed: building
// vnetlab needs no clang. Regenerate after changing bpf/policy*.[ch] (clang 14 and
// libbpf-dev): go generate ./internal/datapath/polbpf
//go:generate go tool bpf2go -tags linux -target bpfel policy ../../../bpf/policy.c -- -O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu

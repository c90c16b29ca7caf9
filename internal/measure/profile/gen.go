package profile

// The generated profile_bpfel.go and profile_bpfel.o are committed: building
// vnetlab needs no clang. Regenerate after changing bpf/profile.c (clang 14
// and libbpf-dev): go generate ./internal/measure/profile
//go:generate go tool bpf2go -tags linux -target bpfel -type sample_key profile ../../../bpf/profile.c -- -O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu

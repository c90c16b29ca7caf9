package tcbpf

// The generated service_bpfel.go and service_bpfel.o are committed: building
// vnetlab needs no clang. Regenerate after changing bpf/*.[ch] (clang 14 and
// libbpf-dev): go generate ./internal/datapath/tcbpf
//go:generate go tool bpf2go -tags linux -target bpfel -type lb_svc_key -type lb_svc -type lb_backend_key -type lb_backend -type lb_ct_key -type lb_ct -type pod_route -type np_ct -type lb6_svc_key -type lb6_backend -type lb6_ct_key -type lb6_ct service ../../../bpf/service.c -- -O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu

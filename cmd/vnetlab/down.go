package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/vnetlab/vnetlab/internal/platform/lab"
)

func newDownCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "down LAB [LAB...]",
		Short: "Remove a lab: its processes, eBPF pins, namespaces (and so every link in them) and state",
		Example: `  sudo vnetlab down lab1
  sudo vnetlab down big svc v6`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireRoot(); err != nil {
				return err
			}
			for _, n := range args {
				if err := lab.Down(n, nil); err != nil {
					return err
				}
				fmt.Printf("lab %s removed\n", n)
			}
			return nil
		},
	}
}

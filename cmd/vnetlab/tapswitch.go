package main

import (
	"github.com/spf13/cobra"

	"github.com/vnetlab/vnetlab/internal/datapath/tapswitch"
)

func init() { extraCommands = append(extraCommands, newTapSwitchCmd) }

// tap-switch is the userspace forwarder of the tap-naive and tap-offload
// modes. `vnetlab up` starts it in the node namespace with the pods' TAPs
// already open as descriptors 3, 4, ...; it is not meant to be run by hand.
func newTapSwitchCmd() *cobra.Command {
	var (
		ports   []string
		vnetHdr int
	)
	cmd := &cobra.Command{
		Use:    "tap-switch --port NAME --port NAME ... [--vnet-hdr 12]",
		Short:  "Userspace L2 switch between TAP descriptors 3.. (started by up for the tap modes)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return tapswitch.Main(ports, vnetHdr)
		},
	}
	cmd.Flags().StringArrayVar(&ports, "port", nil, "name of the next TAP descriptor (3, 4, ...), for logs")
	cmd.Flags().IntVar(&vnetHdr, "vnet-hdr", 0, "virtio_net_hdr size when the TAPs use IFF_VNET_HDR (0: plain frames)")
	return cmd
}

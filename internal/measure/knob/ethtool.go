package knob

import (
	"fmt"
	"strings"

	"github.com/safchain/ethtool"

	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// Offloads are set and read through github.com/safchain/ethtool (the
// SIOCETHTOOL feature calls, ETHTOOL_[GS]FEATURES): github.com/mdlayher/ethtool,
// the ethtool-netlink library, reads and sets link modes, FEC, WoL and
// private flags but not features (v0.7.0). Both calls act on the network
// namespace the calling thread is in (nsutil.Do).

// fixedSuffix marks a feature the device cannot change.
const fixedSuffix = " (fixed)"

// setFeatures turns each feature of off on or off on link ifname: the
// kernel strings of it the device can change (verify reads back the rest).
func setFeatures(ifname string, off Offloads) error {
	e, err := ethtool.NewEthtool()
	if err != nil {
		return err
	}
	defer e.Close()
	states, err := e.FeaturesWithState(ifname)
	if err != nil {
		return err
	}
	change := map[string]bool{}
	for name, on := range off {
		f, _ := featureByName(name)
		for _, s := range f.Strings {
			if states[s].Available {
				change[s] = on
			}
		}
	}
	if len(change) == 0 {
		return nil
	}
	return e.Change(ifname, change)
}

// readFeatures is each offload's state on ifname by short name: "on",
// "off" or "mixed" over the kernel strings the device has (it can change
// them, or they are on), " (fixed)" when it can change none of them:
// "off (fixed)" when it has none. The kernel lists every feature string
// for every device: one neither changeable nor on is one it lacks.
func readFeatures(ifname string) (map[string]string, error) {
	e, err := ethtool.NewEthtool()
	if err != nil {
		return nil, err
	}
	defer e.Close()
	states, err := e.FeaturesWithState(ifname)
	if err != nil {
		return nil, fmt.Errorf("ethtool features of %s: %w", ifname, err)
	}
	out := map[string]string{}
	for _, f := range Features {
		on, n, changeable := 0, 0, false
		for _, s := range f.Strings {
			st, ok := states[s]
			if !ok || (!st.Available && !st.Active) {
				continue
			}
			n++
			if st.Active {
				on++
			}
			changeable = changeable || st.Available
		}
		state := "mixed"
		switch on {
		case 0:
			state = "off"
		case n:
			state = "on"
		}
		if !changeable {
			state += fixedSuffix
		}
		out[f.Name] = state
	}
	return out, nil
}

// SetOffloads turns the features of o on or off on link in namespace ns
// (what `ip netns exec NS ethtool -K LINK ...` does), and checks the
// kernel kept them.
func SetOffloads(ns, link string, o Offloads) error {
	return nsutil.Do(ns, func() error {
		if err := setFeatures(link, o); err != nil {
			return fmt.Errorf("ethtool -K %s %s in %s: %w", link, o, ns, err)
		}
		got, err := readFeatures(link)
		if err != nil {
			return err
		}
		for _, name := range o.Names() {
			if want := onOff(o[name]); !strings.HasPrefix(got[name], want) {
				return fmt.Errorf("%s in %s: %s stays %s, not %s", link, ns, name, got[name], want)
			}
		}
		return nil
	})
}

// ReadOffloads is each feature's state on link in namespace ns, by short
// name ("on", "off", "mixed", with " (fixed)" when the device cannot change it).
func ReadOffloads(ns, link string) (map[string]string, error) {
	var out map[string]string
	err := nsutil.Do(ns, func() error {
		var err error
		out, err = readFeatures(link)
		return err
	})
	return out, err
}

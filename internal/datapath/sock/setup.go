package sock

import (
	"github.com/vnetlab/vnetlab/internal/system/cgroup"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// Tracker is told every path Setup is about to create, before it exists,
// so that whoever owns the lab (its journal: `vnetlab down` and `clean`)
// removes them even if this process dies halfway.
type Tracker interface {
	Cgroup(path string) error
	Pin(path string) error
}

// Setup gives lab socket-level Services: it opens the plane and, unless a
// previous Setup did, attaches it to the lab's cgroup, telling track the
// cgroup and every pin. Clients started in Attachment.Cgroup
// (proc.Cmd.InCgroup, engine.Target.ClientCgroup) are translated. The
// ebpf-sock Service provider (internal/platform/labservice) is its user.
// The maps it creates are sized for the lab's family fam (OpenFamily).
func Setup(lab string, fam family.Family, track Tracker) (*Plane, Attachment, error) {
	return setup(lab, fam, track, 0, false)
}

// setup is Setup, for the sockets of one network namespace only when
// netnsCookie is not 0 (OpenNetnsOnly), and the tc programs behind for the
// other namespaces with podsViaTC (OpenPodsViaTC).
func setup(lab string, fam family.Family, track Tracker, netnsCookie uint64, podsViaTC bool) (*Plane, Attachment, error) {
	cg, err := cgroup.LabPath(lab)
	if err != nil {
		return nil, Attachment{}, err
	}
	if err := track.Cgroup(cg); err != nil {
		return nil, Attachment{}, err
	}
	p, err := open(lab, fam, netnsCookie, podsViaTC)
	if err != nil {
		return nil, Attachment{}, err
	}
	if err := pins(track, p.Created()); err != nil {
		p.Close()
		return nil, Attachment{}, err
	}
	if p.Attached() {
		return p, Attachment{Cgroup: cg}, nil
	}
	a, err := p.Attach()
	if err == nil {
		err = pins(track, a.Pins)
	}
	if err != nil {
		_ = p.Detach()
		p.Close()
		return nil, Attachment{}, err
	}
	return p, a, nil
}

func pins(track Tracker, paths []string) error {
	for _, p := range paths {
		if err := track.Pin(p); err != nil {
			return err
		}
	}
	return nil
}

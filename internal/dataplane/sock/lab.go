package sock

import (
	"github.com/vnetlab/vnetlab/internal/cgroup"
	"github.com/vnetlab/vnetlab/internal/lab"
)

// Setup gives a lab (held by this process) socket-level Services: it opens
// the plane and attaches it to the lab's cgroup, journaling the cgroup
// before it exists and every pin, so that down and clean remove them even
// if this process dies halfway. Clients started in Attachment.Cgroup
// (proc.Cmd.InCgroup, engine.Target.ClientCgroup) are translated.
func Setup(l *lab.Lab) (*Plane, Attachment, error) { return setup(l, 0, false) }

// setup is Setup, for the sockets of one network namespace only when
// netnsCookie is not 0 (OpenNetnsOnly), and the tc programs behind for the
// other namespaces with podsViaTC (OpenPodsViaTC).
func setup(l *lab.Lab, netnsCookie uint64, podsViaTC bool) (*Plane, Attachment, error) {
	name := l.State.Name
	cg, err := cgroup.LabPath(name)
	if err != nil {
		return nil, Attachment{}, err
	}
	if err := l.Journal().Record(lab.KindCgroup, cg); err != nil {
		return nil, Attachment{}, err
	}
	p, err := open(name, netnsCookie, podsViaTC)
	if err != nil {
		return nil, Attachment{}, err
	}
	for _, c := range p.Created() {
		if err := l.Journal().Record(lab.KindPin, c); err != nil {
			p.Close()
			return nil, Attachment{}, err
		}
	}
	a, err := p.Attach()
	if err == nil {
		for _, pin := range a.Pins {
			if err = l.Journal().Record(lab.KindPin, pin); err != nil {
				break
			}
		}
	}
	if err != nil {
		_ = p.Detach()
		p.Close()
		return nil, Attachment{}, err
	}
	return p, a, nil
}

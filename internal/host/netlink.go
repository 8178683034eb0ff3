package host

import (
	"encoding/json"
	"fmt"
	"os"
)

// Link is what netlink says about an interface (RTM_GETLINK).
type Link struct {
	Name        string `json:"name"`
	Index       int    `json:"index"`
	Kind        string `json:"kind,omitempty"`
	MTU         int    `json:"mtu"`
	TxQueueLen  int    `json:"txqueuelen"`
	NumTxQueues int    `json:"num_tx_queues"`
	NumRxQueues int    `json:"num_rx_queues"`
	OperState   string `json:"operstate"`
	Up          bool   `json:"up"`
	Loopback    bool   `json:"loopback,omitempty"`
	MAC         string `json:"mac,omitempty"`
}

// LinkQdisc is one qdisc attached to the interface with the given index.
type LinkQdisc struct {
	Ifindex int `json:"ifindex"`
	Qdisc
}

// Netlink is the seam for facts only netlink has. The live implementation talks
// rtnetlink in the current network namespace; StaticNetlink replays a file so
// fixtures and captured trees need no kernel.
type Netlink interface {
	Links() ([]Link, error)
	Qdiscs() ([]LinkQdisc, error)
	Routes() ([]Route, error)
}

// Ethtooler is the seam for ethtool ioctls. A nil *Ethtool with a nil error means
// the interface has no ethtool support at all (lo, some virtual devices).
type Ethtooler interface {
	Ethtool(iface string) (*Ethtool, error)
}

// NetlinkFile is the name, at the top of a captured or fixture root, of the JSON
// file that stands in for netlink and ethtool (see StaticNetlink).
const NetlinkFile = "lowlat-netlink.json"

// StaticNetlink serves netlink and ethtool facts from data, for fixture trees
// (DIR/lowlat-netlink.json) and tests.
type StaticNetlink struct {
	LinkList  []Link              `json:"links"`
	QdiscList []LinkQdisc         `json:"qdiscs"`
	RouteList []Route             `json:"routes"`
	EthtoolBy map[string]*Ethtool `json:"ethtool,omitempty"`
}

// LoadStaticNetlink reads a StaticNetlink JSON file.
func LoadStaticNetlink(path string) (*StaticNetlink, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("netlink fixture: %w", err)
	}
	var s StaticNetlink
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("netlink fixture %s: %w", path, err)
	}
	return &s, nil
}

func (s *StaticNetlink) Links() ([]Link, error)       { return s.LinkList, nil }
func (s *StaticNetlink) Qdiscs() ([]LinkQdisc, error) { return s.QdiscList, nil }
func (s *StaticNetlink) Routes() ([]Route, error)     { return s.RouteList, nil }

// Ethtool returns the recorded ethtool facts; interfaces without a record have none.
func (s *StaticNetlink) Ethtool(iface string) (*Ethtool, error) { return s.EthtoolBy[iface], nil }

package host

import (
	"encoding/json"
	"errors"
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
	// Errors keeps what the captured host could not read, so a tree read
	// back says "unreadable" where the host did, never "empty": "links",
	// "qdiscs" and "routes" for the netlink dumps, "ethtool:IFACE" per
	// interface. A list with an error is not read.
	Errors map[string]string `json:"errors,omitempty"`
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

// recorded returns the recorded error of source, or nil.
func (s *StaticNetlink) recorded(source string) error {
	if e, ok := s.Errors[source]; ok {
		return errors.New(e)
	}
	return nil
}

func (s *StaticNetlink) Links() ([]Link, error) {
	if err := s.recorded("links"); err != nil {
		return nil, err
	}
	return s.LinkList, nil
}

func (s *StaticNetlink) Qdiscs() ([]LinkQdisc, error) {
	if err := s.recorded("qdiscs"); err != nil {
		return nil, err
	}
	return s.QdiscList, nil
}

func (s *StaticNetlink) Routes() ([]Route, error) {
	if err := s.recorded("routes"); err != nil {
		return nil, err
	}
	return s.RouteList, nil
}

// Ethtool returns the recorded ethtool facts, or the recorded failure;
// interfaces without either have none (the driver answers nothing).
func (s *StaticNetlink) Ethtool(iface string) (*Ethtool, error) {
	if err := s.recorded("ethtool:" + iface); err != nil {
		return nil, err
	}
	return s.EthtoolBy[iface], nil
}

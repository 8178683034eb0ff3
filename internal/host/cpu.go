package host

import (
	"path"
	"slices"
	"sort"
	"strconv"
)

const sysCPU = "/sys/devices/system/cpu"

// cpus reads CPU topology: which CPUs are online, core, package and SMT
// siblings of each, NUMA nodes, cpufreq governors and isolated CPUs.
//
// Which CPUs are online comes from the kernel's online list; without it,
// from the offline list (present CPUs not in it are online); without
// either, from each CPU's own online file, and a CPU without one is online:
// the kernel leaves the file out exactly for the CPUs that cannot be
// unplugged (cpu0 on most x86 machines).
func (rd *fileReader) cpus() {
	f := rd.f
	var offline []int
	listed, offlineListed := false, false
	if b, ok := rd.read(sysCPU + "/online"); ok {
		if l, err := ParseCPUList(string(b)); err != nil {
			rd.fail(sysCPU+"/online", err)
		} else {
			rd.online, listed = l, true
		}
	}
	if !listed {
		if b, ok := rd.readOpt(sysCPU + "/offline"); ok {
			if l, err := ParseCPUList(string(b)); err != nil {
				rd.fail(sysCPU+"/offline", err)
			} else {
				offline, offlineListed = l, true
			}
		}
	}
	dir, ents, err := rd.r.readDirResolved(sysCPU)
	if err != nil {
		rd.fail(sysCPU, err)
		return
	}
	var ids []int
	for _, e := range ents {
		if n, ok := suffixNum(e.Name(), "cpu"); ok && e.IsDir() {
			ids = append(ids, n)
		}
	}
	sort.Ints(ids)
	nodeOf := rd.numa()
	var online []int
	for _, id := range ids {
		c := CPU{ID: id, Core: -1, Package: -1, Node: -1}
		cdir := path.Join(dir, "cpu"+strconv.Itoa(id))
		switch {
		case listed:
			c.Online = slices.Contains(rd.online, id)
		case offlineListed:
			c.Online = !slices.Contains(offline, id)
		default:
			b, err := rd.r.readAt(cdir, "online")
			switch {
			case err == nil:
				c.Online = trimValue(b) == "1"
			case isNotExist(err):
				c.Online = true // no online file: this CPU cannot be unplugged
			default:
				rd.failGroup(sysCPU+"/cpu*/online", err)
			}
		}
		if c.Online {
			online = append(online, id)
		}
		// Offline CPUs lose their topology directory on some kernels.
		if n, ok := rd.intAt(cdir, "topology/core_id", sysCPU+"/cpu*/topology/core_id"); ok {
			c.Core = n
		}
		if n, ok := rd.intAt(cdir, "topology/physical_package_id", sysCPU+"/cpu*/topology/physical_package_id"); ok {
			c.Package = n
		}
		// An online CPU always has its siblings list: without it, SMT is
		// unknown here.
		if l, ok := rd.cpuListAt(cdir, "topology/thread_siblings_list", sysCPU+"/cpu*/topology/thread_siblings_list", c.Online); ok {
			c.Siblings = l
		}
		if n, ok := nodeOf[id]; ok {
			c.Node = n
		}
		// cpufreq is a link to ../cpufreq/policyN, so it is read by path.
		if b, ok := rd.readItem(path.Join(sysCPU, "cpu"+strconv.Itoa(id), "cpufreq/scaling_governor"),
			sysCPU+"/cpu*/cpufreq/scaling_governor"); ok {
			c.Governor = trimValue(b)
		}
		f.CPUs = append(f.CPUs, c)
	}
	if !listed {
		rd.online = online // softnet_stat rows follow the online CPUs
	}
	if b, ok := rd.readOpt(sysCPU + "/isolated"); ok {
		if l, err := ParseCPUList(string(b)); err != nil {
			rd.fail(sysCPU+"/isolated", err)
		} else {
			f.IsolatedCPUs = l
		}
	}
}

const sysNode = "/sys/devices/system/node"

// numa reads /sys/devices/system/node/nodeN/cpulist into f.NUMA and returns
// the node of each CPU. Kernels without NUMA have no node directory; then
// every CPU's node stays -1 (unknown) and NUMA is empty. Whether the kernel
// has NUMA is known only later, from its config: a missing directory is
// kept in noNodes for kernelSupport to judge.
func (rd *fileReader) numa() map[int]int {
	nodeOf := map[int]int{}
	dir, ents, err := rd.r.readDirResolved(sysNode)
	if err != nil {
		if isNotExist(err) {
			rd.noNodes = err
		} else {
			rd.fail(sysNode, err)
		}
		return nodeOf
	}
	for _, e := range ents {
		id, ok := suffixNum(e.Name(), "node")
		if !ok || !e.IsDir() {
			continue
		}
		// Every node lists its CPUs: a node without the list is a tree
		// that lost it, and the node's CPUs are unknown.
		cpus, ok := rd.cpuListAt(path.Join(dir, e.Name()), "cpulist", sysNode+"/node*/cpulist", true)
		if !ok {
			continue
		}
		rd.f.NUMA = append(rd.f.NUMA, NUMANode{ID: id, CPUs: cpus})
		for _, c := range cpus {
			nodeOf[c] = id
		}
	}
	sort.Slice(rd.f.NUMA, func(i, j int) bool { return rd.f.NUMA[i].ID < rd.f.NUMA[j].ID })
	return nodeOf
}

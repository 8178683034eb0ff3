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
func (rd *fileReader) cpus() {
	f := rd.f
	if b, ok := rd.read(sysCPU + "/online"); ok {
		if l, err := ParseCPUList(string(b)); err != nil {
			rd.fail(sysCPU+"/online", err)
		} else {
			rd.online = l
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
	for _, id := range ids {
		c := CPU{ID: id, Core: -1, Package: -1, Node: -1}
		cdir := path.Join(dir, "cpu"+strconv.Itoa(id))
		if rd.online != nil {
			c.Online = slices.Contains(rd.online, id)
		} else if b, err := rd.r.readAt(cdir, "online"); err == nil {
			c.Online = trimValue(b) == "1"
		} else {
			c.Online = id == 0 // cpu0 has no online file where it cannot go offline
		}
		// Offline CPUs lose their topology directory on some kernels.
		if n, ok := rd.intAt(cdir, "topology/core_id", sysCPU+"/cpu*/topology/core_id"); ok {
			c.Core = n
		}
		if n, ok := rd.intAt(cdir, "topology/physical_package_id", sysCPU+"/cpu*/topology/physical_package_id"); ok {
			c.Package = n
		}
		if l, ok := rd.cpuListAt(cdir, "topology/thread_siblings_list", sysCPU+"/cpu*/topology/thread_siblings_list"); ok {
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
	if b, ok := rd.readOpt(sysCPU + "/isolated"); ok {
		if l, err := ParseCPUList(string(b)); err != nil {
			rd.fail(sysCPU+"/isolated", err)
		} else {
			f.IsolatedCPUs = l
		}
	}
}

// numa reads /sys/devices/system/node/nodeN/cpulist into f.NUMA and returns
// the node of each CPU. Kernels without NUMA have no node directory; then
// every CPU's node stays -1 (unknown) and NUMA is empty.
func (rd *fileReader) numa() map[int]int {
	const sysNode = "/sys/devices/system/node"
	nodeOf := map[int]int{}
	dir, ents, err := rd.r.readDirResolved(sysNode)
	if err != nil {
		if !isNotExist(err) {
			rd.fail(sysNode, err)
		}
		return nodeOf
	}
	for _, e := range ents {
		id, ok := suffixNum(e.Name(), "node")
		if !ok || !e.IsDir() {
			continue
		}
		cpus, ok := rd.cpuListAt(path.Join(dir, e.Name()), "cpulist", sysNode+"/node*/cpulist")
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

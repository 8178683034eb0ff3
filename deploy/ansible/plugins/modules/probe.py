#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lowlat maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: probe
short_description: Measure latency, jitter and loss from the host with lowlat probe
version_added: "0.1.0"
description:
  - Runs C(lowlat probe KIND TARGET --json) on the host and returns its
    result (RTT percentiles, jitter, loss). It never changes the host.
  - C(udp), C(tcp) and C(crr) need a C(lowlat reflector) at the target;
    C(icmp) needs none.
options:
  kind:
    description: The probe.
    type: str
    choices: [udp, tcp, crr, icmp]
    default: udp
  target:
    description: C(HOST:PORT) of a reflector, or C(HOST) for icmp.
    type: str
    required: true
  duration:
    description: How long to probe, e.g. C(10s).
    type: str
  interval:
    description: Time between probes, e.g. C(10ms).
    type: str
  size:
    description: Payload bytes.
    type: int
  dscp:
    description: DSCP of the probes, e.g. C(EF).
    type: str
extends_documentation_fragment:
  - lowlat.lowlat.lowlat.binary
notes:
  - Supports check mode (the probe runs; it changes nothing).
author:
  - lowlat maintainers (@lowlat)
'''

EXAMPLES = r'''
- name: Measure the path to the edge
  lowlat.lowlat.probe:
    target: 198.51.100.7:7431
    duration: 10s
  register: edge

- name: Fail when the edge is slow
  ansible.builtin.assert:
    that: edge.result.rtt_us.p99 < 30000
'''

RETURN = r'''
result:
  description: lowlat probe's JSON result (see docs/probe.md).
  returned: success
  type: dict
'''

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.lowlat.lowlat.plugins.module_utils.lowlat import (
    COMMON_ARGS, run_lowlat)


def main():
    argument_spec = dict(
        kind=dict(type='str', default='udp', choices=['udp', 'tcp', 'crr', 'icmp']),
        target=dict(type='str', required=True),
        duration=dict(type='str'),
        interval=dict(type='str'),
        size=dict(type='int'),
        dscp=dict(type='str'),
    )
    argument_spec.update(COMMON_ARGS)
    del argument_spec['journal']
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    p = module.params
    args = ['probe', p['kind'], p['target'], '--json']
    for flag in ('duration', 'interval', 'size', 'dscp'):
        if p[flag] is not None:
            args += ['--' + flag, str(p[flag])]
    rc, data, err = run_lowlat(module, args, journal=False)
    if rc != 0:
        module.fail_json(msg=err or 'lowlat probe: exit %d' % rc, rc=rc, result=data)
    module.exit_json(changed=False, result=data)


if __name__ == '__main__':
    main()

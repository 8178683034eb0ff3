#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lowlat maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: tune
short_description: Apply a lowlat profile, gated by a measurement, or confirm one
version_added: "0.1.0"
description:
  - Runs C(lowlat apply) on the host, one journaled transaction that sets the
    profile's sysctls, qdiscs, routes, NIC and interrupt settings.
  - With O(prove), the change is kept only when a measurement after it is not
    worse than before (and meets O(slo)); otherwise lowlat rolls it back by
    itself and the task fails. The host needs no controller to undo it.
  - With O(confirm) and no O(prove), the host rolls the change back by itself
    when no C(state=confirmed) task reaches it before the deadline (a host
    that becomes unreachable keeps nothing).
  - With O(prove) and O(hold), a change the gate keeps is not confirmed by
    the gate either - it waits for a C(state=confirmed) task, under the
    dead-man switch re-armed to O(confirm) from the gate's decision; the
    caller decides when the host is proven (a canary's judge, a new
    connection that still reaches the host).
  - Check mode runs C(lowlat plan) and changes nothing; diff mode shows
    before and after per knob.
  - A profile the host already has is a no-op (C(changed=false)).
options:
  state:
    description:
      - C(applied) applies the profile.
      - C(confirmed) keeps the transaction that awaits confirmation (C(lowlat confirm)).
    type: str
    choices: [applied, confirmed]
    default: applied
  profile:
    description: Built-in profile name or a profile file on the host. Required with C(state=applied).
    type: str
  set:
    description: 'Profile parameters and overrides (C(--set key=value)), for example C({rate: 2mbit}).'
    type: dict
    default: {}
  skip:
    description: Settings of the profile to leave out (C(--skip)).
    type: list
    elements: str
    default: []
  iface:
    description: Interfaces for qdisc and route settings (default those with a default route).
    type: list
    elements: str
    default: []
  persist:
    description: Make the change survive reboots (sysctl.d file and boot unit, journaled).
    type: bool
    default: false
  persist_root:
    description: With O(persist), write the files below this directory instead of C(/).
    type: path
  prove:
    description: The gate's probe, as for C(lowlat probe), e.g. C(udp 10.0.0.1:7431 --interval 10ms --duration 5s).
    type: str
  slo:
    description: With O(prove), what the change must achieve, e.g. C(p99<=8ms,loss<=1%).
    type: str
  settle:
    description: With O(prove), how long to wait after the change before measuring again.
    type: str
  confirm:
    description:
      - Dead-man switch, e.g. C(120s), at most C(192h). Without O(prove), a later C(state=confirmed) task must confirm.
      - With O(hold), how long a change the gate kept waits for that task, from the gate's decision.
    type: str
  hold:
    description:
      - With O(prove) and O(confirm), hold a change the gate keeps for a later
        C(state=confirmed) task instead of letting the gate confirm it
        (C(lowlat apply --hold)). Unless that task reaches the host within
        O(confirm) of the gate's decision, the host rolls the change back by itself.
    type: bool
    default: false
    version_added: "1.1.0"
extends_documentation_fragment:
  - lowlat.lowlat.lowlat
notes:
  - Needs root on the host, as lowlat apply does.
  - Supports check mode and diff mode.
author:
  - lowlat maintainers (@lowlat)
'''

EXAMPLES = r'''
- name: Apply capped-uplink, keep it only if the probe is not worse
  lowlat.lowlat.tune:
    profile: capped-uplink
    set:
      rate: 18mbit
    prove: udp 198.51.100.7:7431 --interval 10ms --duration 10s
    slo: p99<=30ms,loss<=1%

- name: Apply with a dead-man switch
  lowlat.lowlat.tune:
    profile: game-udp
    confirm: 120s
  register: tuned

- name: Keep it (this task reaching the host proves it still answers)
  lowlat.lowlat.tune:
    state: confirmed
  when: tuned.txn

- name: Gate, but keep the change only once a later task confirms it
  lowlat.lowlat.tune:
    profile: capped-uplink
    set:
      rate: 18mbit
    prove: load 198.51.100.7:7431 --upload
    hold: true
    confirm: 24h15m
  register: held
'''

RETURN = r'''
txn:
  description: The transaction lowlat applied or confirmed, null when nothing changed.
  returned: always
  type: str
  sample: 20261124T101010Z-abc123
changes:
  description: The knobs written, each with knob, before and after.
  returned: always
  type: list
  elements: dict
  sample: [{knob: sysctl/net.ipv4.tcp_congestion_control, before: cubic, after: bbr}]
gate:
  description: The gate's verdict, rows and measurements (with O(prove)).
  returned: when O(prove) is set and the host changed
  type: dict
plan:
  description: The plan (check mode, or when nothing changed).
  returned: in check mode and when nothing changed
  type: dict
confirm_by:
  description:
    - The dead-man switch's deadline (RFC 3339), with O(confirm) and no O(prove),
      or with O(hold) once the gate kept the change.
  returned: when awaiting confirmation
  type: str
notes:
  description: What lowlat said besides the changes.
  returned: always
  type: list
  elements: str
'''

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.lowlat.lowlat.plugins.module_utils.lowlat import (
    COMMON_ARGS, EXIT_GATE_ROLLED_BACK, knob_diff, run_lowlat, status)


def profile_args(p):
    args = ['--profile', p['profile']]
    for k in sorted(p['set']):
        args += ['--set', '%s=%s' % (k, p['set'][k])]
    for s in p['skip']:
        args += ['--skip', s]
    for i in p['iface']:
        args += ['--iface', i]
    return args


def plan(module):
    rc, data, err = run_lowlat(module, ['plan', '--json'] + profile_args(module.params), journal=False)
    if rc != 0:
        module.fail_json(msg=err or 'lowlat plan: exit %d' % rc, rc=rc)
    result = dict(changed=bool(data.get('changed')), txn=None, changes=[], notes=[], plan=data)
    if module._diff:
        result['diff'] = data.get('diff', [])
    module.exit_json(**result)


def apply(module):
    p = module.params
    args = ['apply', '--yes', '--json'] + profile_args(p)
    if p['persist']:
        args.append('--persist')
    if p['persist_root']:
        args += ['--persist-root', p['persist_root']]
    for flag in ('prove', 'slo', 'settle', 'confirm'):
        if p[flag]:
            args += ['--' + flag, p[flag]]
    if p['hold']:
        args.append('--hold')
    rc, data, err = run_lowlat(module, args)
    result = dict(
        changed=bool(data.get('changed')),
        txn=data.get('txn'),
        changes=data.get('changes', []),
        notes=data.get('notes') or [],
    )
    for k in ('gate', 'plan', 'confirm_by', 'failed', 'rolled_back'):
        if data.get(k) is not None:
            result[k] = data[k]
    if module._diff:
        result['diff'] = knob_diff(result['changes'])
    if rc == EXIT_GATE_ROLLED_BACK:
        gate = data.get('gate') or {}
        module.fail_json(msg='lowlat gate: rolled back: %s' % gate.get('reason', err), rc=rc, **result)
    if rc != 0:
        module.fail_json(msg=err or 'lowlat apply: exit %d' % rc, rc=rc, **result)
    module.exit_json(**result)


def confirm(module):
    if module.check_mode:
        waiting = [a for a in status(module).get('active', []) if a.get('confirm_by') and not a.get('confirmed')]
        module.exit_json(changed=bool(waiting), txn=waiting[-1]['id'] if waiting else None, changes=[], notes=[])
    rc, data, err = run_lowlat(module, ['confirm', '--json'])
    if rc != 0 and 'no transaction awaits confirmation' in err:
        module.exit_json(changed=False, txn=None, changes=[], notes=[err])
    if rc != 0:
        module.fail_json(msg=err or 'lowlat confirm: exit %d' % rc, rc=rc)
    module.exit_json(changed=True, txn=data.get('txn'), changes=data.get('changes', []), notes=[])


def main():
    argument_spec = dict(
        state=dict(type='str', default='applied', choices=['applied', 'confirmed']),
        profile=dict(type='str'),
        set=dict(type='dict', default={}),
        skip=dict(type='list', elements='str', default=[]),
        iface=dict(type='list', elements='str', default=[]),
        persist=dict(type='bool', default=False),
        persist_root=dict(type='path'),
        prove=dict(type='str'),
        slo=dict(type='str'),
        settle=dict(type='str'),
        confirm=dict(type='str'),
        hold=dict(type='bool', default=False),
    )
    argument_spec.update(COMMON_ARGS)
    module = AnsibleModule(
        argument_spec=argument_spec,
        required_if=[('state', 'applied', ['profile']), ('hold', True, ['prove', 'confirm'])],
        required_by={'slo': 'prove', 'settle': 'prove'},
        supports_check_mode=True,
    )
    if module.params['state'] == 'confirmed':
        confirm(module)
    elif module.check_mode:
        plan(module)
    else:
        apply(module)


if __name__ == '__main__':
    main()

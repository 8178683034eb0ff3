#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lowlat maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: canary_judge
short_description: Judge canary hosts against control hosts from Prometheus with lowlat canary judge
version_added: "1.1.0"
description:
  - Runs C(lowlat canary judge --json) on the node the task runs on, which
    reads the lowlat monitors' series from Prometheus and compares the canary
    hosts with the control hosts over the window (see docs/canary.md).
  - Run it on the control node, once per rollout (C(delegate_to=localhost)
    and C(run_once=true)); the managed hosts need not reach Prometheus.
  - The task fails only when the judge could not judge as asked, a usage
    error (lowlat's exit 2 - a malformed selector, an unknown metric, an
    empty group, a bad URL or SLO), with lowlat's one line as its message,
    or any other error of lowlat (exit 1).
  - A verdict of C(fail), C(marginal) or C(inconclusive) does B(not) fail
    the task. The verdict is returned, and the playbook decides what to do
    with it (the collection's C(canary) playbook rolls the canary back and
    stops on anything but C(pass)).
  - The judge only reads Prometheus, so it reports C(changed=false) and runs
    in check mode too.
options:
  prometheus:
    description: Prometheus's URL, e.g. C(http://prometheus:9090).
    type: str
    required: true
  canary:
    description:
      - The canary hosts' series, as PromQL label matchers, with or without
        braces, e.g. C(instance=~"10\\.1\\.0\\.(1|2):9431").
    type: str
    required: true
  control:
    description:
      - The control hosts' series, as PromQL label matchers. Hosts of the
        same role and region as the canary that the rollout has not touched.
    type: str
    required: true
  window:
    description:
      - The judged window, which ends at O(end), e.g. C(24h). The window
        before it is read too, to compare each host with itself.
    type: str
    required: true
  step:
    description:
      - The per-host step, e.g. C(5m) (lowlat's default is the window / 24).
        At least two scrape intervals; the window needs at least six steps.
    type: str
  end:
    description: The end of the judged window, RFC 3339 or unix seconds (lowlat's default is now).
    type: str
  metrics:
    description:
      - The metrics to judge (lowlat's default is p99, jitter and loss) -
        p50, p90, p99, p999, jitter, loss, first_byte_p99, or any lowlat
        histogram as C(NAME) or C(NAME:pNN).
    type: list
    elements: str
  slo:
    description: SLO terms checked on the canary group, e.g. C(p99<=8ms,loss<=1%).
    type: str
  host_label:
    description: The label that names a host (lowlat's default is C(instance)).
    type: str
  html:
    description: Also write the judge's self-contained HTML page to this file, on the node the task runs on.
    type: path
  timeout:
    description: How long the judge may wait for Prometheus, e.g. C(30s).
    type: str
extends_documentation_fragment:
  - lowlat.lowlat.lowlat.binary
notes:
  - Supports check mode (the judge only reads Prometheus; it changes nothing).
  - Exit codes of C(lowlat canary judge) - 0 pass, 3 marginal, 4 fail,
    5 inconclusive, 2 usage, 1 other error.
seealso:
  - name: lowlat canary judge
    description: The judge's method and its numbers (docs/canary.md).
    link: https://github.com/lowlat/lowlat/blob/main/docs/canary.md
author:
  - lowlat maintainers (@lowlat)
'''

EXAMPLES = r'''
- name: Judge the canary against the hosts left alone
  lowlat.lowlat.canary_judge:
    prometheus: http://prometheus.example.net:9090
    canary: 'instance=~"edge-(01|02):9431"'
    control: 'instance=~"edge-(0[3-9]|1[0-9]):9431"'
    window: 24h
    slo: p99<=8ms,loss<=1%
  delegate_to: localhost
  run_once: true
  register: judged

- name: Stop unless the canary passed
  ansible.builtin.fail:
    msg: "canary {{ judged.verdict }} (score {{ judged.score }}): {{ judged.why }}"
  when: judged.verdict != 'pass'
  run_once: true
'''

RETURN = r'''
verdict:
  description: The judge's verdict - pass, marginal, fail or inconclusive.
  returned: success
  type: str
  sample: pass
score:
  description: The judge's score, 0 to 100.
  returned: success
  type: float
  sample: 100
why:
  description: The verdict's reason, one line.
  returned: success
  type: str
metrics:
  description:
    - Each metric's classification (pass, marginal, fail, inconclusive) with
      its effect, confidence interval, p-value and the groups' medians, as
      lowlat's JSON has it.
  returned: success
  type: list
  elements: dict
slo:
  description: Each SLO term, its value on the canary group and whether it held (empty without O(slo)).
  returned: success
  type: list
  elements: dict
canary_hosts:
  description: The canary hosts the judge found (values of the host label).
  returned: success
  type: list
  elements: str
control_hosts:
  description: The control hosts the judge found.
  returned: success
  type: list
  elements: str
window:
  description: The window judged - start, end and step.
  returned: success
  type: dict
rc:
  description: lowlat's exit code - 0 pass, 3 marginal, 4 fail, 5 inconclusive.
  returned: always
  type: int
result:
  description: lowlat canary judge's whole JSON result.
  returned: success
  type: dict
'''

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.lowlat.lowlat.plugins.module_utils.lowlat import (
    COMMON_ARGS, run_lowlat)

# lowlat canary judge's exit code for each verdict; any other is an error.
VERDICT_EXITS = {0: 'pass', 3: 'marginal', 4: 'fail', 5: 'inconclusive'}


def main():
    argument_spec = dict(
        prometheus=dict(type='str', required=True),
        canary=dict(type='str', required=True),
        control=dict(type='str', required=True),
        window=dict(type='str', required=True),
        step=dict(type='str'),
        end=dict(type='str'),
        metrics=dict(type='list', elements='str'),
        slo=dict(type='str'),
        host_label=dict(type='str'),
        html=dict(type='path'),
        timeout=dict(type='str'),
    )
    argument_spec.update(COMMON_ARGS)
    del argument_spec['journal']
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    p = module.params
    args = ['canary', 'judge', '--json',
            '--prometheus', p['prometheus'], '--canary', p['canary'],
            '--control', p['control'], '--window', p['window']]
    for opt in ('step', 'end', 'slo', 'host_label', 'html', 'timeout'):
        if p[opt] is not None:
            args += ['--' + opt.replace('_', '-'), str(p[opt])]
    for m in p['metrics'] or []:
        args += ['--metric', m]
    rc, data, err = run_lowlat(module, args, journal=False)
    if rc not in VERDICT_EXITS:
        # A usage error (2) or another error (1): lowlat's one line says it.
        lines = [ln.strip() for ln in err.splitlines() if ln.strip()]
        msg = lines[0] if lines else 'lowlat canary judge: exit %d' % rc
        module.fail_json(msg=msg, rc=rc, stderr=err)
    # failed=False said outright: Ansible takes a result with a non-zero rc
    # and no failed for a failure, and a verdict is not one.
    module.exit_json(
        changed=False,
        failed=False,
        rc=rc,
        verdict=data.get('verdict', VERDICT_EXITS[rc]),
        score=data.get('score'),
        why=data.get('why', ''),
        metrics=data.get('metrics') or [],
        slo=data.get('slo') or [],
        canary_hosts=(data.get('canary') or {}).get('hosts') or [],
        control_hosts=(data.get('control') or {}).get('hosts') or [],
        window=data.get('window') or {},
        result=data,
    )


if __name__ == '__main__':
    main()

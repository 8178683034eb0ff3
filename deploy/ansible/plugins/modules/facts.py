#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lowlat maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: facts
short_description: lowlat doctor's findings and lowlat status as facts
version_added: "0.1.0"
description:
  - Runs C(lowlat doctor --json) and C(lowlat status --json) on the host and
    sets C(ansible_facts.lowlat), with the findings (id, severity, evidence, fix),
    the host summary, the transactions in force and any drift.
  - Read only.
options:
  profile:
    description: Judge the host against this profile too (C(doctor --profile)).
    type: str
extends_documentation_fragment:
  - lowlat.lowlat.lowlat
notes:
  - Supports check mode.
author:
  - lowlat maintainers (@lowlat)
'''

EXAMPLES = r'''
- name: Read lowlat's findings
  lowlat.lowlat.facts:

- name: Stop on a critical finding
  ansible.builtin.fail:
    msg: "{{ ansible_facts.lowlat.findings | selectattr('severity', 'equalto', 'critical') | map(attribute='id') | list }}"
  when: ansible_facts.lowlat.findings | selectattr('severity', 'equalto', 'critical') | list
'''

RETURN = r'''
ansible_facts:
  description: Facts under the key C(lowlat).
  returned: always
  type: complex
  contains:
    lowlat:
      description: C(findings), C(host), C(active) (transactions in force), C(drift).
      type: dict
'''

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.lowlat.lowlat.plugins.module_utils.lowlat import (
    COMMON_ARGS, run_lowlat, status)


def main():
    argument_spec = dict(profile=dict(type='str'))
    argument_spec.update(COMMON_ARGS)
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    args = ['doctor', '--json']
    if module.params['profile']:
        args += ['--profile', module.params['profile']]
    rc, doctor, err = run_lowlat(module, args, journal=False)
    if rc != 0:
        module.fail_json(msg=err or 'lowlat doctor: exit %d' % rc, rc=rc)
    st = status(module)
    facts = dict(
        findings=doctor.get('findings', []),
        host=doctor.get('host', {}),
        active=st.get('active', []),
        drift=st.get('drift', []),
    )
    module.exit_json(changed=False, ansible_facts=dict(lowlat=facts))


if __name__ == '__main__':
    main()

import type { ResourceRef } from './informer.ts';

/** The built-in Kubernetes resources paddock reads and writes: one home for each reference. */

export const PODS: ResourceRef = { group: '', version: 'v1', plural: 'pods', namespaced: true, kind: 'Pod' };
export const SECRETS: ResourceRef = {
  group: '',
  version: 'v1',
  plural: 'secrets',
  namespaced: true,
  kind: 'Secret',
};
export const NODES: ResourceRef = {
  group: '',
  version: 'v1',
  plural: 'nodes',
  namespaced: false,
  kind: 'Node',
};
export const PERSISTENT_VOLUME_CLAIMS: ResourceRef = {
  group: '',
  version: 'v1',
  plural: 'persistentvolumeclaims',
  namespaced: true,
  kind: 'PersistentVolumeClaim',
};
export const PERSISTENT_VOLUMES: ResourceRef = {
  group: '',
  version: 'v1',
  plural: 'persistentvolumes',
  namespaced: false,
  kind: 'PersistentVolume',
};
export const STATEFUL_SETS: ResourceRef = {
  group: 'apps',
  version: 'v1',
  plural: 'statefulsets',
  namespaced: true,
  kind: 'StatefulSet',
};
export const EVENTS: ResourceRef = {
  group: 'events.k8s.io',
  version: 'v1',
  plural: 'events',
  namespaced: true,
  kind: 'Event',
};
export const LEASES: ResourceRef = {
  group: 'coordination.k8s.io',
  version: 'v1',
  plural: 'leases',
  namespaced: true,
  kind: 'Lease',
};
export const CUSTOM_RESOURCE_DEFINITIONS: ResourceRef = {
  group: 'apiextensions.k8s.io',
  version: 'v1',
  plural: 'customresourcedefinitions',
  namespaced: false,
  kind: 'CustomResourceDefinition',
};
export const SERVICE_ACCOUNTS: ResourceRef = {
  group: '',
  version: 'v1',
  plural: 'serviceaccounts',
  namespaced: true,
  kind: 'ServiceAccount',
};
export const ROLES: ResourceRef = {
  group: 'rbac.authorization.k8s.io',
  version: 'v1',
  plural: 'roles',
  namespaced: true,
  kind: 'Role',
};
export const ROLE_BINDINGS: ResourceRef = {
  group: 'rbac.authorization.k8s.io',
  version: 'v1',
  plural: 'rolebindings',
  namespaced: true,
  kind: 'RoleBinding',
};

// docs/api.md §4.6 projects and §4.7 project API keys: HTTP shapes around core/projects.ts.
import { PROJECT_DETAIL_RECENT, type projectRoutes } from '@svc-mail/sdk';
import type { Scope } from '@svc-mail/sdk';
import type { SuppressionReason } from '@svc-mail/sdk';
import type { Handlers, RequestCtx } from '../deps.js';
import { fail, paged } from '../errors.js';
import { authorizeOrganization, type Access } from '../authorize.js';
import { SECRET_WARNING } from '../../core/tokens.js';
import type { Queryable } from '../../storage/pg/client.js';
import {
  createProject,
  DEFAULT_SCOPES,
  liveProjectKey,
  mintProjectKey,
  rotateProjectKey,
} from '../../core/projects.js';
import {
  getProject,
  listProjects,
  listProjectsOfUser,
  renameProject,
  softDeleteProject,
  type Project,
} from '../../storage/pg/projects.js';
import { listApiKeys, renameApiKey, revokeApiKey, type ApiKey } from '../../storage/pg/api-keys.js';
import { listMessages } from '../../storage/pg/message-reads.js';
import { listRecentSuppressions, type SuppressionRecord } from '../../storage/pg/suppressions.js';
import { messageJson } from './messages.js';
import { listWebhookEndpoints } from '../../storage/pg/webhooks.js';
import { webhookJson } from './webhooks.js';

const iso = (d: Date) => d.toISOString();
export const projectJson = (p: Project) => ({
  id: p.id,
  organization_id: p.organization_id,
  name: p.name,
  status: p.status,
  plan: p.plan,
  created_at: iso(p.created_at),
  updated_at: iso(p.updated_at),
});
const keyJson = (k: ApiKey) => ({
  id: k.id,
  keyId: k.keyId,
  label: k.label,
  scopes: k.scopes as Scope[],
  managed: k.managed,
  allowedCidrs: k.allowedCidrs,
  allowed_cidrs: k.allowedCidrs,
  rotatedFrom: k.rotatedFrom,
  createdAt: iso(k.createdAt),
  expiresAt: k.expiresAt ? iso(k.expiresAt) : null,
});
export const suppressionJson = (s: SuppressionRecord) => ({
  id: s.id,
  address: s.address,
  reason: s.reason as SuppressionReason,
  detail: s.detail,
  createdAt: iso(s.createdAt),
});

/** A minted key as the API shows it: the secret this once, with the warning to keep it. */
export const mintedKeyJson = ({ secret, ...key }: ApiKey & { secret: string }) => ({
  ...keyJson(key),
  secret,
  warning: SECRET_WARNING,
});

function granted(rc: RequestCtx): Access & { projectId: string } {
  if (!rc.access?.projectId) throw new Error('route without a project target reached a project handler');
  return rc.access as Access & { projectId: string };
}

async function loadProject(q: Queryable, id: string): Promise<Project> {
  const p = await getProject(q, id);
  if (!p) throw fail('not_found', 'No such project.');
  return p;
}

const keyOf = (rc: RequestCtx, keyId: string) => liveProjectKey(rc.deps, granted(rc).projectId, keyId, rc.now);

export const projectHandlers: Handlers<typeof projectRoutes> = {
  async 'console.projects.create'({ body }, rc) {
    const { organizationId } = rc.access as Access;
    const { project, key } = await createProject(rc.deps, {
      organizationId,
      name: body.name,
      createdBy: rc.principal?.kind === 'account_token' ? rc.principal.userId : null,
      now: rc.now,
    });
    rc.audit.projectId = project.id;
    rc.audit.targetId = project.id;
    return { project: projectJson(project), apiKey: mintedKeyJson(key) };
  },

  async 'console.projects.list'({ query }, rc) {
    const { db } = rc.deps.storage;
    const p = rc.principal;
    if (!p) throw fail('unauthorized', 'Request authentication failed.');
    let projects: Project[];
    if (query.organizationId) {
      // Filtering by an organization the caller cannot see is a 404, like every other route.
      const access = await authorizeOrganization(db, p, query.organizationId);
      projects = await listProjects(db, [access.organizationId]);
    } else if (p.kind === 'organization_token') projects = await listProjects(db, [p.organizationId]);
    else if (p.kind === 'account_token' && p.userRole !== 'staff') projects = await listProjectsOfUser(db, p.userId);
    else projects = await listProjects(db, null);
    return { projects: projects.map(projectJson) };
  },

  async 'console.projects.me'(_in, rc) {
    if (rc.principal?.kind !== 'project_api_key') throw fail('unauthorized', 'Request authentication failed.');
    return { project: projectJson(await loadProject(rc.deps.storage.db, rc.principal.projectId)) };
  },

  async 'console.projects.get'(_in, rc) {
    const { projectId } = granted(rc);
    const { db } = rc.deps.storage;
    const [project, keys, suppressions, messages, webhooks] = await Promise.all([
      loadProject(db, projectId),
      listApiKeys(db, projectId, rc.now),
      listRecentSuppressions(db, projectId, PROJECT_DETAIL_RECENT),
      listMessages(db, { projectId }, { limit: PROJECT_DETAIL_RECENT, cursor: null }),
      listWebhookEndpoints(db, projectId),
    ]);
    // Sender domains join this view as their issue lands.
    return {
      project: projectJson(project),
      apiKeys: keys.map(keyJson),
      domains: [],
      webhooks: webhooks.map(webhookJson),
      suppressions: suppressions.map(suppressionJson),
      messages: paged(messages).rows.map(messageJson),
    };
  },

  async 'console.projects.update'({ body }, rc) {
    const project = await renameProject(rc.deps.storage.db, granted(rc).projectId, body.name, rc.now);
    if (!project) throw fail('not_found', 'No such project.');
    return { project: projectJson(project) };
  },

  async 'console.projects.delete'(_in, rc) {
    if (!(await softDeleteProject(rc.deps.storage.db, granted(rc).projectId, rc.now)))
      throw fail('not_found', 'No such project.');
    return { ok: true as const };
  },

  async 'console.projects.apiKeys.create'({ body }, rc) {
    const key = await mintProjectKey(rc.deps.storage.db, rc.deps.storage.sealer, {
      projectId: granted(rc).projectId,
      label: body.label ?? null,
      scopes: body.scopes ?? DEFAULT_SCOPES,
      allowedCidrs: body.allowedCidrs ?? [],
      now: rc.now,
    });
    rc.audit.targetId = key.keyId;
    return mintedKeyJson(key);
  },

  async 'console.projects.apiKeys.list'(_in, rc) {
    return { apiKeys: (await listApiKeys(rc.deps.storage.db, granted(rc).projectId, rc.now)).map(keyJson) };
  },

  async 'console.projects.apiKeys.update'({ params, body }, rc) {
    const key = await keyOf(rc, params.keyId);
    if (key.managed === 'platform')
      throw fail('invalid_request', 'Platform-managed (tk_) keys cannot be renamed; rotate or revoke them.');
    await renameApiKey(rc.deps.storage.db, key.id, body.label);
    return { key: keyJson({ ...key, label: body.label }) };
  },

  async 'console.projects.apiKeys.rotate'({ params }, rc) {
    const { old, key } = await rotateProjectKey(rc.deps, granted(rc).projectId, params.keyId, rc.now);
    rc.audit.targetId = old.keyId;
    return mintedKeyJson(key);
  },

  async 'console.projects.apiKeys.delete'({ params }, rc) {
    const key = await keyOf(rc, params.keyId);
    await revokeApiKey(rc.deps.storage.db, key.id, rc.now);
    return { ok: true as const };
  },
};

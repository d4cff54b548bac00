// docs/api.md §4.9: a project's suppression list in the console. The route's target check found the
// project and allowed the caller; addresses are normalized as sendEmail looks recipients up.
import { type suppressionRoutes } from '@svc-mail/sdk';
import type { Handlers, RequestCtx } from '../deps.js';
import { fail, paged, pageRequest } from '../errors.js';
import { normalizeMailbox } from '../../mail/compose.js';
import { suppressionJson } from './projects.js';
import {
  deleteSuppressionByAddress,
  getSuppression,
  insertSuppression,
  listSuppressions,
} from '../../storage/pg/suppressions.js';

function projectOf(rc: RequestCtx): string {
  const projectId = rc.access?.projectId;
  if (!projectId) throw new Error('a suppression route reached without its project target');
  return projectId;
}

/** The local part as given, the domain in lower case; 400 naming `field` when it is no mailbox. */
function addressOf(raw: string, field: string): string {
  const address = normalizeMailbox(raw);
  if (!address)
    throw fail('invalid_request', `${field} is not a valid address.`, [{ field, message: 'is not a valid address' }]);
  return address;
}

export const suppressionHandlers: Handlers<typeof suppressionRoutes> = {
  async 'console.projects.suppressions.create'({ body }, rc) {
    const projectId = projectOf(rc);
    const address = addressOf(body.address, 'body.address');
    const { db } = rc.deps.storage;
    const added = await insertSuppression(db, {
      projectId,
      address,
      reason: body.reason ?? 'manual',
      detail: body.detail ?? null,
      now: rc.now,
    });
    // As the data layer answers (/v1/suppressions/create): the row already there is named.
    if (!added.inserted)
      throw fail(
        'conflict',
        `The project already suppresses ${address}.`,
        added.id ? { id: added.id, address } : { address },
      );
    rc.audit.targetId = address;
    const row = await getSuppression(db, projectId, added.id);
    // Lifted between the insert and this read: it was added, and is gone again.
    if (!row) throw fail('not_found', 'No such suppression in this project.');
    return { suppression: suppressionJson(row) };
  },

  async 'console.projects.suppressions.list'({ query }, rc) {
    const address = query.address === undefined ? null : addressOf(query.address, 'query.address');
    const page = paged(
      await listSuppressions(rc.deps.storage.db, { projectId: projectOf(rc), address }, pageRequest(query)),
    );
    return { suppressions: page.rows.map(suppressionJson), nextCursor: page.nextCursor };
  },

  async 'console.projects.suppressions.delete'({ params }, rc) {
    const address = addressOf(params.address, 'params.address');
    if (!(await deleteSuppressionByAddress(rc.deps.storage.db, projectOf(rc), address))) {
      throw fail('not_found', 'No such suppression in this project.');
    }
    rc.audit.targetId = address;
    return { ok: true as const };
  },
};

// imap/commands.ts: the table's state and capability checks, the storage-free handlers (CAPABILITY,
// NOOP, LOGOUT, ID, ENABLE, NAMESPACE, STARTTLS's answer), BAD for what does not parse,
// the one place backend errors become codes, and the answers to refused commands.
import t from 'tap';
import { COMMANDS, backendOutcome, capabilities, dispatch, refusalResponse } from '../../imap/commands.js';
import { BackendError, type MailboxBackend } from '../../imap/backend.js';
import type { Session, SessionState } from '../../imap/session.js';
import { readRaw } from './parse-helpers.js';

function session(state: SessionState = 'not-authenticated', overrides: Partial<Session> = {}) {
  const sent: string[] = [];
  const s: Session = {
    state,
    principal: state === 'not-authenticated' ? null : { id: 'u1', username: 'bob' },
    selected: null,
    enabled: new Set(),
    secure: false,
    clientId: null,
    remoteAddress: '127.0.0.1',
    config: {
      appendLimit: 1000,
      tlsAvailable: true,
      allowPlaintextAuth: false,
      serverName: 'svc-mail',
      serverVersion: '0.1.0',
      loginFailureDelayMs: 0,
    },
    send: (b) => void sent.push(b.toString()),
    readLine: async () => null,
    ...overrides,
  };
  return { s, sent };
}

// A backend whose every operation fails loudly: the handlers under test must not touch it. Only the
// check the dispatcher makes before each command of a logged-in session answers (the principal holds).
const backend = new Proxy({} as MailboxBackend, {
  get: (_t, name) =>
    name === 'checkPrincipal'
      ? async () => true
      : () => {
          throw new Error(`backend.${String(name)} called`);
        },
});

async function run(s: Session, wire: string) {
  return dispatch(s, backend, readRaw(wire));
}

t.test('capabilities follow the state and TLS (RFC 3501 §6.2.3, §7.2.1)', async (t) => {
  const plain = session();
  t.ok(capabilities(plain.s).includes('STARTTLS'));
  t.ok(capabilities(plain.s).includes('LOGINDISABLED'));
  t.notOk(capabilities(plain.s).includes('AUTH=PLAIN'));
  const tls = session('not-authenticated', { secure: true });
  t.notOk(capabilities(tls.s).includes('STARTTLS'));
  t.ok(capabilities(tls.s).includes('AUTH=PLAIN'));
  t.equal(capabilities(tls.s)[0], 'IMAP4rev1');
  const authed = capabilities(session('authenticated').s);
  for (const c of ['LITERAL+', 'IDLE', 'UIDPLUS', 'MOVE', 'QUOTA', 'SPECIAL-USE', 'ENABLE', 'NAMESPACE', 'ID']) {
    t.ok(authed.includes(c), c);
  }
  for (const c of ['UNSELECT', 'CONDSTORE', 'APPENDLIMIT=1000']) t.ok(authed.includes(c), c);
  t.notOk(authed.includes('STARTTLS'));
  // Every capability a command needs is one we advertise in some state where it is valid.
  for (const [name, spec] of Object.entries(COMMANDS)) {
    if (!spec.capability || name === 'STARTTLS') continue;
    const states = spec.states.filter((st) => capabilities(session(st).s).includes(spec.capability as string));
    t.ok(states.length > 0, `${name} needs ${spec.capability}`);
  }
});

t.test('CAPABILITY, NOOP, LOGOUT', async (t) => {
  const { s, sent } = session();
  t.same(await run(s, 'a1 CAPABILITY'), { close: false, startTls: false });
  t.match(sent[0], /^\* CAPABILITY IMAP4rev1 .*STARTTLS.*LOGINDISABLED\r\n$/);
  t.equal(sent[1], 'a1 OK CAPABILITY completed\r\n');
  await run(s, 'a2 noop');
  t.equal(sent[2], 'a2 OK NOOP completed\r\n');
  t.same(await run(s, 'a3 LOGOUT'), { close: true, startTls: false });
  t.same(sent.slice(3), ['* BYE logging out\r\n', 'a3 OK LOGOUT completed\r\n']);
  t.equal(s.state, 'logout');
  await run(s, 'a4 NOOP');
  t.match(sent[5], /^a4 BAD NOOP is not valid in the logout state/);
});

t.test('ID (RFC 2971) records the client and names the server', async (t) => {
  const { s, sent } = session();
  await run(s, 'a ID ("name" "imapflow" "version" "1.0")');
  t.same(s.clientId, [
    ['name', 'imapflow'],
    ['version', '1.0'],
  ]);
  t.same(sent, ['* ID ("name" "svc-mail" "version" "0.1.0")\r\n', 'a OK ID completed\r\n']);
});

t.test('ENABLE (RFC 5161): authenticated state only; CONDSTORE once; unknown ignored', async (t) => {
  const { s, sent } = session('authenticated');
  await run(s, 't2 ENABLE CONDSTORE X-GOOD-IDEA');
  t.same(sent, ['* ENABLED CONDSTORE\r\n', 't2 OK ENABLE completed\r\n']);
  await run(s, 't3 ENABLE CONDSTORE');
  t.equal(sent[2], '* ENABLED\r\n', 'already enabled: listed no more');
  t.ok(s.enabled.has('CONDSTORE'));
  const sel = session('selected');
  await run(sel.s, 't4 ENABLE CONDSTORE');
  t.match(sel.sent[0], /^t4 BAD ENABLE is not valid in the selected state/);
  const pre = session();
  await run(pre.s, 't5 ENABLE CONDSTORE');
  t.match(pre.sent[0], /^t5 BAD/);
});

t.test('NAMESPACE (RFC 2342): one personal namespace, "/" delimiter', async (t) => {
  const { s, sent } = session('authenticated');
  await run(s, 'A001 NAMESPACE');
  t.same(sent, ['* NAMESPACE (("" "/")) NIL NIL\r\n', 'A001 OK NAMESPACE completed\r\n']);
});

t.test('state checks come before handlers; STARTTLS hands the connection to the handshake', async (t) => {
  const pre = session();
  await run(pre.s, 'a SELECT INBOX');
  t.match(pre.sent[0], /^a BAD SELECT is not valid in the not-authenticated state/);
  await run(pre.s, 'b FETCH 1 FLAGS');
  t.match(pre.sent[1], /^b BAD FETCH is not valid/);
  // RFC 3501 §6.2.3: LOGINDISABLED (no TLS here) refuses a password in the clear before any check.
  await run(pre.s, 'c LOGIN bob secret');
  t.equal(pre.sent[2], 'c NO [PRIVACYREQUIRED] use TLS to log in\r\n');
  const authed = session('authenticated');
  await run(authed.s, 'd LOGIN bob secret');
  t.match(authed.sent[0], /^d BAD LOGIN is not valid in the authenticated state/);
  await run(authed.s, 'e UID EXPUNGE 1:3');
  t.match(authed.sent[1], /^e BAD UID EXPUNGE is not valid in the authenticated state/);
  const sel = session('selected');
  // Without a selected mailbox behind the state (no handler has a backend here), the message commands refuse.
  await run(sel.s, 'f FETCH 1:* ALL');
  t.match(sel.sent[0], /^f BAD no mailbox is selected/);
  // STARTTLS: OK, and the server starts the handshake after it (RFC 3501 §6.2.1; imap/server.ts).
  const tls = session();
  t.same(await run(tls.s, 'g STARTTLS'), { close: false, startTls: true });
  t.equal(tls.sent[0], 'g OK Begin TLS negotiation now\r\n');
});

t.test('a command that does not parse is a tagged BAD and the session goes on', async (t) => {
  const { s, sent } = session();
  t.same(await run(s, 'a1 FROB'), { close: false, startTls: false });
  t.same(await run(s, 'x'), { close: false, startTls: false });
  await run(s, 'a2 NOOP');
  t.same(sent, [
    'a1 BAD unknown command FROB\r\n',
    'x BAD expected a space at the end of the line\r\n',
    'a2 OK NOOP completed\r\n',
  ]);
  const sel = session('selected');
  await run(sel.s, 'a SEARCH CHARSET KOI8-R ALL');
  t.equal(sel.sent[0], 'a NO [BADCHARSET (US-ASCII UTF-8)] charset KOI8-R is not supported\r\n');
});

t.test('a handler that throws: BackendError → its code, anything else → NO [SERVERBUG]', async (t) => {
  t.same(backendOutcome('CREATE', new BackendError('already-exists', 'exists')), {
    status: 'NO',
    code: { code: 'ALREADYEXISTS' },
    text: 'exists',
  });
  t.same(backendOutcome('APPEND', new BackendError('nonexistent', 'no such mailbox')).code, { code: 'TRYCREATE' });
  t.same(backendOutcome('UID COPY', new BackendError('nonexistent', 'x')).code, { code: 'TRYCREATE' });
  t.same(backendOutcome('SELECT', new BackendError('nonexistent', 'x')).code, { code: 'NONEXISTENT' });
  t.same(backendOutcome('APPEND', new BackendError('over-quota', 'full')).code, { code: 'OVERQUOTA' });
  const { s, sent } = session('authenticated');
  const errors: unknown[] = [];
  const original = COMMANDS.NAMESPACE.handler;
  (COMMANDS.NAMESPACE as { handler: unknown }).handler = async () => {
    throw new Error('boom');
  };
  try {
    await dispatch(s, backend, readRaw('n NAMESPACE'), (e) => errors.push(e));
  } finally {
    (COMMANDS.NAMESPACE as { handler: unknown }).handler = original;
  }
  t.same(sent, ['n NO [SERVERBUG] internal error\r\n']);
  t.equal(errors.length, 1);
});

t.test('answers to commands the reader refused', async (t) => {
  const r = (e: Parameters<typeof refusalResponse>[0]) => refusalResponse(e).toString();
  t.equal(
    r({ kind: 'refused', reason: 'literal-too-big', tag: 'a', name: 'APPEND', limit: 1000 }),
    'a NO [TOOBIG] literal larger than 1000 octets\r\n',
  );
  t.equal(
    r({ kind: 'refused', reason: 'literal-too-big', tag: 'b', name: 'LOGIN', limit: 65536 }),
    'b BAD [TOOBIG] literal larger than 65536 octets\r\n',
  );
  t.equal(
    r({ kind: 'refused', reason: 'line-too-long', tag: null, name: null, limit: 8192 }),
    '* BAD command line longer than 8192 octets\r\n',
  );
  t.equal(
    r({ kind: 'refused', reason: 'too-many-literals', tag: 'c', name: 'SEARCH', limit: 100 }),
    'c BAD [LIMIT] more than 100 literals in one command\r\n',
  );
});

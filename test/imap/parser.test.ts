// imap/parser.ts: the RFC 3501 §6 and §8 example commands and those of the extensions, through the real
// reader, into typed commands; and commands that must be answered BAD (or NO) with a useful text.
import t from 'tap';
import { parse, parseFailure } from './parse-helpers.js';
import { parseCommand } from '../../imap/parser.js';

const seq = (from: number | '*', to: number | '*' = from) => ({ from, to });

t.test('RFC 3501 §8 sample session', async (t) => {
  t.same(parse('a001 login mrc secret'), {
    tag: 'a001',
    command: { name: 'LOGIN', username: 'mrc', password: 'secret' },
  });
  t.same(parse('a002 select inbox').command, { name: 'SELECT', mailbox: 'INBOX', condstore: false });
  t.same(parse('a003 fetch 12 full').command, {
    name: 'FETCH',
    set: [seq(12)],
    attributes: ['FLAGS', 'INTERNALDATE', 'RFC822.SIZE', 'ENVELOPE', 'BODY'].map((kind) => ({ kind })),
    changedSince: null,
  });
  t.same(parse('a004 fetch 12 body[header]').command, {
    name: 'FETCH',
    set: [seq(12)],
    attributes: [{ kind: 'BODY[]', peek: false, section: { part: [], text: 'HEADER', fields: null }, partial: null }],
    changedSince: null,
  });
  t.same(parse('a005 store 12 +flags \\deleted').command, {
    name: 'STORE',
    set: [seq(12)],
    unchangedSince: null,
    action: { op: 'add', silent: false, flags: ['\\Deleted'] },
  });
  t.same(parse('a006 logout'), { tag: 'a006', command: { name: 'LOGOUT' } });
});

t.test('RFC 3501 §6.1 and §6.2: any state and not authenticated', async (t) => {
  for (const [wire, name] of [
    ['abcd CAPABILITY', 'CAPABILITY'],
    ['a002 NOOP', 'NOOP'],
    ['A023 LOGOUT', 'LOGOUT'],
    ['a001 STARTTLS', 'STARTTLS'],
  ]) {
    t.same(parse(wire as string).command, { name });
  }
  t.same(parse('A001 AUTHENTICATE GSSAPI').command, {
    name: 'AUTHENTICATE',
    mechanism: 'GSSAPI',
    initialResponse: null,
  });
  // RFC 4959 §3 (SASL-IR): an initial response, and "=" for an empty one.
  t.same(parse('a AUTHENTICATE PLAIN AGJvYgBzZWNyZXQ=').command, {
    name: 'AUTHENTICATE',
    mechanism: 'PLAIN',
    initialResponse: 'AGJvYgBzZWNyZXQ=',
  });
  t.equal((parse('a AUTHENTICATE plain =').command as { initialResponse: string }).initialResponse, '');
  t.same(parse('a001 LOGIN SMITH SESAME').command, { name: 'LOGIN', username: 'SMITH', password: 'SESAME' });
  t.same(parse('a LOGIN "fred \\"the\\" \\\\ man" {7}\r\nfat man').command, {
    name: 'LOGIN',
    username: 'fred "the" \\ man',
    password: 'fat man',
  });
  t.same(parse('a LOGIN {4+}\r\nzoë "pässword"').command, { name: 'LOGIN', username: 'zoë', password: 'pässword' });
});

t.test('RFC 3501 §6.3: authenticated state', async (t) => {
  t.same(parse('A142 SELECT INBOX').command, { name: 'SELECT', mailbox: 'INBOX', condstore: false });
  t.same(parse('A932 EXAMINE blurdybloop').command, { name: 'EXAMINE', mailbox: 'blurdybloop', condstore: false });
  t.same(parse('A003 CREATE owatagusiam/').command, { name: 'CREATE', mailbox: 'owatagusiam/' });
  t.same(parse('A004 CREATE owatagusiam/blurdybloop').command, { name: 'CREATE', mailbox: 'owatagusiam/blurdybloop' });
  t.same(parse('A683 DELETE blurdybloop').command, { name: 'DELETE', mailbox: 'blurdybloop' });
  t.same(parse('A683 RENAME blurdybloop sarasoop').command, { name: 'RENAME', from: 'blurdybloop', to: 'sarasoop' });
  t.same(parse('A685 RENAME foo zap').command, { name: 'RENAME', from: 'foo', to: 'zap' });
  t.same(parse('A002 SUBSCRIBE #news.comp.mail.mime').command, { name: 'SUBSCRIBE', mailbox: '#news.comp.mail.mime' });
  t.same(parse('A002 UNSUBSCRIBE #news.comp.mail.mime').command, {
    name: 'UNSUBSCRIBE',
    mailbox: '#news.comp.mail.mime',
  });
  const list = (reference: string, pattern: string) => ({
    name: 'LIST',
    reference,
    patterns: [pattern],
    options: { selection: [], return: [], status: null },
  });
  t.same(parse('A101 LIST "" ""').command, list('', ''));
  t.same(parse('A102 LIST #news.comp.mail.misc ""').command, list('#news.comp.mail.misc', ''));
  t.same(parse('A103 LIST /usr/staff/jones ""').command, list('/usr/staff/jones', ''));
  t.same(parse('A202 LIST ~/Mail/ %').command, list('~/Mail/', '%'));
  t.same(parse('A1 LIST "" *').command, list('', '*'));
  t.same(parse('A1 LIST "" INBOX/%/x*').command, list('', 'INBOX/%/x*'));
  t.same(parse('A002 LSUB "#news." "comp.mail.*"').command, {
    name: 'LSUB',
    reference: '#news.',
    pattern: 'comp.mail.*',
  });
  t.same(parse('A042 STATUS blurdybloop (UIDNEXT MESSAGES)').command, {
    name: 'STATUS',
    mailbox: 'blurdybloop',
    items: ['UIDNEXT', 'MESSAGES'],
  });
  t.same(parse('A1 STATUS Sent (messages recent uidvalidity unseen HIGHESTMODSEQ APPENDLIMIT)').command, {
    name: 'STATUS',
    mailbox: 'Sent',
    items: ['MESSAGES', 'RECENT', 'UIDVALIDITY', 'UNSEEN', 'HIGHESTMODSEQ', 'APPENDLIMIT'],
  });
});

t.test('RFC 3501 §6.3.11 APPEND with its example message', async (t) => {
  const message =
    'Date: Mon, 7 Feb 1994 21:52:25 -0800 (PST)\r\n' +
    'From: Fred Foobar <foobar@Blurdybloop.COM>\r\n' +
    'Subject: afternoon meeting\r\n' +
    'To: mooch@owatagu.siam.edu\r\n' +
    'Message-Id: <B27397-0100000@Blurdybloop.COM>\r\n' +
    'MIME-Version: 1.0\r\n' +
    'Content-Type: TEXT/PLAIN; CHARSET=US-ASCII\r\n' +
    '\r\n' +
    'Hello Joe, do you think we can meet at 3:30 tomorrow?\r\n';
  t.equal(Buffer.byteLength(message), 310, 'the RFC says 310 octets');
  const cmd = parse(`A003 APPEND saved-messages (\\Seen) {310}\r\n${message}`).command;
  t.same(cmd, {
    name: 'APPEND',
    mailbox: 'saved-messages',
    flags: ['\\Seen'],
    date: null,
    message: Buffer.from(message),
  });
  const dated = parse('a APPEND Drafts (\\Draft $Label1) " 7-Feb-1994 21:52:25 -0800" {5+}\r\nhello').command;
  t.same(dated, {
    name: 'APPEND',
    mailbox: 'Drafts',
    flags: ['\\Draft', '$Label1'],
    date: new Date('1994-02-08T05:52:25Z'),
    message: Buffer.from('hello'),
  });
  const plain = parse('a APPEND INBOX {2+}\r\nhi').command;
  t.same(plain, { name: 'APPEND', mailbox: 'INBOX', flags: [], date: null, message: Buffer.from('hi') });
  t.match(parseFailure('a APPEND INBOX "hello"').message, /expected a date-time/);
  t.match(parseFailure('a APPEND INBOX hello').message, /expected a literal/);
  t.match(parseFailure('a APPEND INBOX (\\Recent) {2+}\r\nhi').message, /Recent/);
  t.match(parseFailure('a APPEND INBOX "31-Feb-1994 21:52:25 -0800" {2+}\r\nhi').message, /no such date/);
});

t.test('RFC 3501 §6.4: selected state', async (t) => {
  for (const [wire, name] of [
    ['FXXZ CHECK', 'CHECK'],
    ['A341 CLOSE', 'CLOSE'],
    ['A202 EXPUNGE', 'EXPUNGE'],
  ]) {
    t.same(parse(wire as string).command, { name });
  }
  t.same(parse('A282 SEARCH FLAGGED SINCE 1-Feb-1994 NOT FROM "Smith"').command, {
    name: 'SEARCH',
    charset: null,
    criteria: {
      key: 'AND',
      operands: [
        { key: 'FLAGGED' },
        { key: 'SINCE', date: { year: 1994, month: 2, day: 1 } },
        { key: 'NOT', operand: { key: 'FROM', value: 'Smith' } },
      ],
    },
  });
  t.same(parse('A283 SEARCH TEXT "string not in mailbox"').command, {
    name: 'SEARCH',
    charset: null,
    criteria: { key: 'TEXT', value: 'string not in mailbox' },
  });
  t.same(parse('A284 SEARCH CHARSET UTF-8 TEXT {6}\r\nXXXXXX').command, {
    name: 'SEARCH',
    charset: 'UTF-8',
    criteria: { key: 'TEXT', value: 'XXXXXX' },
  });
  t.same(parse('A654 FETCH 2:4 (FLAGS BODY[HEADER.FIELDS (DATE FROM)])').command, {
    name: 'FETCH',
    set: [seq(2, 4)],
    attributes: [
      { kind: 'FLAGS' },
      {
        kind: 'BODY[]',
        peek: false,
        section: { part: [], text: 'HEADER.FIELDS', fields: ['DATE', 'FROM'] },
        partial: null,
      },
    ],
    changedSince: null,
  });
  t.same(parse('A003 STORE 2:4 +FLAGS (\\Deleted)').command, {
    name: 'STORE',
    set: [seq(2, 4)],
    unchangedSince: null,
    action: { op: 'add', silent: false, flags: ['\\Deleted'] },
  });
  t.same(parse('A003 COPY 2:4 MEETING').command, { name: 'COPY', set: [seq(2, 4)], mailbox: 'MEETING' });
  t.same(parse('A999 UID FETCH 4827313:4828442 FLAGS').command, {
    name: 'UID FETCH',
    set: [seq(4827313, 4828442)],
    attributes: [{ kind: 'FLAGS' }],
    changedSince: null,
  });
});

t.test('FETCH items: every attribute, sections, partials and macros', async (t) => {
  const atts = (wire: string) => (parse(`a FETCH 1 ${wire}`).command as { attributes: unknown }).attributes;
  const simple = ['ENVELOPE', 'FLAGS', 'INTERNALDATE', 'RFC822', 'RFC822.HEADER', 'RFC822.SIZE', 'RFC822.TEXT'];
  t.same(atts(`(${[...simple, 'BODY', 'BODYSTRUCTURE', 'UID', 'MODSEQ'].join(' ').toLowerCase()})`), [
    ...[...simple, 'BODY', 'BODYSTRUCTURE', 'UID', 'MODSEQ'].map((kind) => ({ kind })),
  ]);
  t.same(
    atts('ALL'),
    ['FLAGS', 'INTERNALDATE', 'RFC822.SIZE', 'ENVELOPE'].map((kind) => ({ kind })),
  );
  t.same(
    atts('fast'),
    ['FLAGS', 'INTERNALDATE', 'RFC822.SIZE'].map((kind) => ({ kind })),
  );
  const body = (section: unknown, partial: unknown = null, peek = false) => [
    { kind: 'BODY[]', peek, section, partial },
  ];
  t.same(
    atts('BODY[1.2.HEADER.FIELDS (SUBJECT FROM)]<0.100>'),
    body({ part: [1, 2], text: 'HEADER.FIELDS', fields: ['SUBJECT', 'FROM'] }, { offset: 0, length: 100 }),
  );
  t.same(
    atts('BODY.PEEK[HEADER.FIELDS.NOT ("X-Spam" Received)]'),
    body({ part: [], text: 'HEADER.FIELDS.NOT', fields: ['X-Spam', 'Received'] }, null, true),
  );
  t.same(atts('BODY[]'), body({ part: [], text: null, fields: null }));
  t.same(atts('BODY[]<500.1000>'), body({ part: [], text: null, fields: null }, { offset: 500, length: 1000 }));
  t.same(atts('BODY[3]'), body({ part: [3], text: null, fields: null }));
  t.same(atts('BODY[4.2.2.1.MIME]'), body({ part: [4, 2, 2, 1], text: 'MIME', fields: null }));
  t.same(atts('BODY[TEXT]'), body({ part: [], text: 'TEXT', fields: null }));
  t.same(atts('body.peek[2.text]'), body({ part: [2], text: 'TEXT', fields: null }, null, true));
  // RFC 7162 §3.1.4.1: CHANGEDSINCE.
  t.equal(
    (parse('s100 UID FETCH 1:* (FLAGS) (CHANGEDSINCE 12345)').command as { changedSince: bigint }).changedSince,
    12345n,
  );
  for (const bad of [
    'BODY[MIME]', // MIME needs a part
    'BODY[1.]',
    'BODY[0]',
    'BODY[1HEADER]',
    'BODY[HEADER.FIELDS]',
    'BODY[HEADER.FIELDS ()]',
    'BODY[]<1>',
    'BODY[]<1.0>',
    'RFC822X',
    'BODY[TEXT',
    '()',
    '(ALL)',
    'ALL FLAGS',
    'BINARY[1]',
  ]) {
    const e = parseFailure(`t FETCH 1 ${bad}`);
    t.equal(e.tag, 't', bad);
    t.equal(e.error.status, 'BAD', bad);
  }
  t.match(parseFailure('t FETCH 1 FLAGS (CHANGEDSINCE 0)').message, /mod-sequence/);
  t.match(parseFailure('t FETCH 1 FLAGS (VANISHED)').message, /unknown FETCH modifier/);
});

t.test('STORE forms, with CONDSTORE UNCHANGEDSINCE (RFC 7162 §3.1.3)', async (t) => {
  const action = (wire: string) => (parse(`a STORE 1 ${wire}`).command as { action: unknown }).action;
  t.same(action('FLAGS (\\Seen \\Flagged)'), { op: 'replace', silent: false, flags: ['\\Seen', '\\Flagged'] });
  t.same(action('-FLAGS.SILENT \\seen'), { op: 'remove', silent: true, flags: ['\\Seen'] });
  t.same(action('+flags.silent $Forwarded Junk'), { op: 'add', silent: true, flags: ['$Forwarded', 'Junk'] });
  t.same(action('FLAGS ()'), { op: 'replace', silent: false, flags: [] });
  t.same(action('FLAGS (\\X-Custom)'), { op: 'replace', silent: false, flags: ['\\X-Custom'] });
  t.same(parse('a103 UID STORE 6,4,8 (UNCHANGEDSINCE 12121230045) +FLAGS.SILENT (\\Deleted)').command, {
    name: 'UID STORE',
    set: [seq(6), seq(4), seq(8)],
    unchangedSince: 12121230045n,
    action: { op: 'add', silent: true, flags: ['\\Deleted'] },
  });
  t.equal((parse('a STORE 1 (UNCHANGEDSINCE 0) FLAGS ()').command as { unchangedSince: bigint }).unchangedSince, 0n);
  for (const bad of ['FLAG (\\Seen)', 'FLAGS', 'FLAGS (\\Recent)', '*FLAGS (x)', 'FLAGS.LOUD (x)', 'FLAGS (a b']) {
    t.equal(parseFailure(`a STORE 1 ${bad}`).error.status, 'BAD', bad);
  }
  t.match(parseFailure('a STORE 1 (UNCHANGEDSINCE 9223372036854775808) FLAGS ()').message, /out of range/);
});

t.test('UID forms and the extensions', async (t) => {
  t.same(parse('A003 UID EXPUNGE 3000:3002').command, { name: 'UID EXPUNGE', set: [seq(3000, 3002)] });
  t.same(parse('a UID MOVE 42:69 foo').command, { name: 'UID MOVE', set: [seq(42, 69)], mailbox: 'foo' });
  t.same(parse('a MOVE 1:* Trash').command, { name: 'MOVE', set: [seq(1, '*')], mailbox: 'Trash' });
  t.same(parse('a UID COPY 1,3 "Saved Items"').command, {
    name: 'UID COPY',
    set: [seq(1), seq(3)],
    mailbox: 'Saved Items',
  });
  t.same(parse('a UID SEARCH UID 1:5').command, {
    name: 'UID SEARCH',
    charset: null,
    criteria: { key: 'UID', set: [seq(1, 5)] },
  });
  t.same(parse('A002 IDLE').command, { name: 'IDLE' });
  t.same(parse('a UNSELECT').command, { name: 'UNSELECT' });
  t.same(parse('A001 NAMESPACE').command, { name: 'NAMESPACE' });
  t.same(parse('t2 ENABLE CONDSTORE X-GOOD-IDEA').command, {
    name: 'ENABLE',
    capabilities: ['CONDSTORE', 'X-GOOD-IDEA'],
  });
  t.same(parse('a023 ID ("name" "sodr" "version" "19.34" "vendor" "Pink Floyd Music Limited")').command, {
    name: 'ID',
    params: [
      ['name', 'sodr'],
      ['version', '19.34'],
      ['vendor', 'Pink Floyd Music Limited'],
    ],
  });
  t.same(parse('a ID NIL').command, { name: 'ID', params: null });
  t.same(parse('a ID ("os" NIL)').command, { name: 'ID', params: [['os', null]] });
  t.same(parse('G GETQUOTAROOT INBOX').command, { name: 'GETQUOTAROOT', mailbox: 'INBOX' });
  t.same(parse('G1 GETQUOTA ""').command, { name: 'GETQUOTA', root: '' });
  t.same(parse('A142 SELECT INBOX (CONDSTORE)').command, { name: 'SELECT', mailbox: 'INBOX', condstore: true });
  t.match(parseFailure('a SELECT INBOX (QRESYNC (1 2))').message, /unknown select parameter/);
  t.match(parseFailure(`a ID (${'"f" "v" '.repeat(31).trim()})`).message, /30/);
  t.match(parseFailure(`a ID ("${'f'.repeat(31)}" "v")`).message, /30 octets/);
  t.match(parseFailure(`a ID ("f" "${'v'.repeat(1025)}")`).message, /1024/);
});

t.test('LIST-EXTENDED (RFC 5258) and LIST-STATUS (RFC 5819) options', async (t) => {
  t.same(
    parse('a LIST (SUBSCRIBED RECURSIVEMATCH) "" (INBOX* "Sent") RETURN (CHILDREN STATUS (MESSAGES UNSEEN))').command,
    {
      name: 'LIST',
      reference: '',
      patterns: ['INBOX*', 'Sent'],
      options: { selection: ['SUBSCRIBED', 'RECURSIVEMATCH'], return: ['CHILDREN'], status: ['MESSAGES', 'UNSEEN'] },
    },
  );
  t.same(parse('a LIST "" "%" RETURN (SPECIAL-USE)').command, {
    name: 'LIST',
    reference: '',
    patterns: ['%'],
    options: { selection: [], return: ['SPECIAL-USE'], status: null },
  });
  t.match(parseFailure('a LIST (BOGUS) "" *').message, /selection option/);
});

t.test('mailbox names: modified UTF-7, INBOX in any case, 8-bit as UTF-8', async (t) => {
  t.same(parse('a SELECT "~peter/mail/&U,BTFw-/&ZeVnLIqe-"').command, {
    name: 'SELECT',
    mailbox: '~peter/mail/台北/日本語',
    condstore: false,
  });
  t.equal((parse('a SELECT iNbOx').command as { mailbox: string }).mailbox, 'INBOX');
  t.equal((parse('a SELECT "Inbox"').command as { mailbox: string }).mailbox, 'INBOX');
  t.equal((parse('a SELECT INBOX/sub').command as { mailbox: string }).mailbox, 'INBOX/sub');
  t.equal((parse('a CREATE Entw&APw-rfe').command as { mailbox: string }).mailbox, 'Entwürfe');
  t.equal((parse('a CREATE {9+}\r\nEntwürfe').command as { mailbox: string }).mailbox, 'Entwürfe');
  t.equal((parse('a CREATE "Tom &- Jerry"').command as { mailbox: string }).mailbox, 'Tom & Jerry');
  const bad = parseFailure('a SELECT &AGE-');
  t.equal(bad.tag, 'a');
  t.match(bad.message, /modified UTF-7/);
  t.match(parseFailure(Buffer.from([...Buffer.from('a CREATE {2+}\r\n'), 0xff, 0xfe])).message, /neither/);
});

t.test('commands that do not parse: BAD with the tag, and a reason', async (t) => {
  const cases: [string, string | null, RegExp][] = [
    ['a FROB', 'a', /unknown command FROB/],
    ['a UID FROB 1', 'a', /unknown command UID FROB/],
    ['a', 'a', /space/],
    ['+x NOOP', null, /bad tag/],
    ['a NOOP extra', 'a', /unexpected text/],
    ['a LOGIN bob', 'a', /space/],
    ['a LOGIN bob "unterminated', 'a', /unterminated/],
    ['a LOGIN bob "bad \\escape"', 'a', /escape/],
    ['a FETCH 0 FLAGS', 'a', /sequence set/],
    ['a FETCH 1,,2 FLAGS', 'a', /sequence set/],
    ['a SELECT', 'a', /space/],
    ['a STATUS INBOX (BOGUS)', 'a', /unknown status item/],
    ['a STATUS INBOX ()', 'a', /status item/],
    ['a  NOOP', 'a', /command name/],
    ['a AUTHENTICATE PLAIN !!!', 'a', /base64/],
    ['a ENABLE', 'a', /space/],
    ['a COPY 1', 'a', /space/],
    ['a UID EXPUNGE', 'a', /space/],
  ];
  for (const [wire, tag, re] of cases) {
    const e = parseFailure(wire);
    t.equal(e.tag, tag, `${wire}: tag`);
    t.equal(e.error.status, 'BAD', `${wire}: BAD`);
    t.match(e.message, re, wire);
  }
  // A literal whose length was announced differently cannot come from the reader; still refused.
  t.throws(
    () => parseCommand({ lines: [Buffer.from('a LOGIN {3}'), Buffer.from(' x')], literals: [Buffer.from('ab')] }),
    { message: /does not match its announcement/ },
  );
});

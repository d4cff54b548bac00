// mta/outbound/bounce-classify.ts against config/bounce-rules.txt (docs/conventions.md #5): every rule is tested
// with the real replies quoted above it, read from the file here without the module's loader, so a
// rule added to the file is tested without touching this file. Then the enhanced-code and basic-code
// fallbacks, connection errors, and the loader's refusal of bad lines.
import t from 'tap';
import { readFileSync } from 'node:fs';
import {
  BOUNCE_CLASSES,
  classify,
  defaultRules,
  loadRules,
  RULES_URL,
  type BounceClass,
} from '../../mta/outbound/bounce-classify.js';
import { parseReply, SmtpReply } from '../../mail/smtp-reply.js';

interface FileRule {
  line: number;
  action: string;
  class: string;
  replies: string[];
}

/** The rules file as this test reads it: each rule line with the `# reply:` quotes above it. */
function readRulesFile(): FileRule[] {
  const out: FileRule[] = [];
  let replies: string[] = [];
  readFileSync(RULES_URL, 'utf8')
    .split(/\r?\n/)
    .forEach((line, i) => {
      const quote = /^#\s*reply:\s*(.+)$/i.exec(line.trim());
      if (quote) replies.push(quote[1]!.trim());
      if (line.trim() === '' || line.trim().startsWith('#')) return;
      const [, action, cls] = line.split(/\t+/).map((f) => f.trim());
      out.push({ line: i + 1, action: action!, class: cls!, replies });
      replies = [];
    });
  return out;
}

const fileRules = readRulesFile();

/** Words regrouped into lines of about `width` characters (a long word stays whole). */
function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let current = '';
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (current !== '' && current.length + 1 + word.length > width) {
      lines.push(current);
      current = word;
    } else {
      current = current === '' ? word : `${current} ${word}`;
    }
  }
  return [...lines, current];
}

/** A quoted reply as a caller could pass it: code and enhanced code split off, the text alone. */
function splitForm(quoted: string): SmtpReply {
  const m = /^(\d{3})[ -](?:([245]\.\d{1,3}\.\d{1,3}) )?(.*)$/.exec(quoted);
  if (!m) throw new Error(`unparseable quote ${quoted}`);
  return new SmtpReply(Number(m[1]), m[2] ?? null, m[3]!);
}

/** A reply from its fields, as the tests below write them. */
const r = (f: { code: number; enhanced?: string | null; text: string }) =>
  new SmtpReply(f.code, f.enhanced ?? null, f.text);

t.test('the rules file loads, and this test sees the same rules as the module', async (t) => {
  t.ok(fileRules.length >= 20, `${fileRules.length} rules`);
  t.same(
    defaultRules.map((r) => r.line),
    fileRules.map((r) => r.line),
    'same rule lines',
  );
  for (const r of fileRules) t.ok(r.replies.length > 0, `line ${r.line} has at least one quoted reply`);
});

// One test per class, one assertion group per quoted reply: the reply classifies to its own rule's
// action and class, and it is that rule (not an earlier, broader one) that decides.
const byClass = new Map<string, FileRule[]>();
for (const r of fileRules) byClass.set(r.class, [...(byClass.get(r.class) ?? []), r]);
for (const [cls, rules] of byClass) {
  t.test(`rule class ${cls}`, async (t) => {
    for (const rule of rules) {
      for (const quoted of rule.replies) {
        const label = `line ${rule.line}: ${quoted.slice(0, 70)}`;
        const raw = parseReply(quoted);
        if (!raw) {
          t.fail(`${label}: not a reply`);
          continue;
        }
        t.equal(classify(raw).rule, rule.line, `${label}: decided by its own rule`);
        t.match(classify(raw), { action: rule.action, class: rule.class }, `${label}: raw form`);
        t.match(classify(splitForm(quoted)), { action: rule.action, class: rule.class }, `${label}: split form`);
        // The same reply on one line per ~60 characters, as a multi-line reply arrives from nodemailer
        // (every line prefixed "550-5.1.1 ", the last "550 5.1.1 "): same answer.
        const split = splitForm(quoted);
        const lines = wrap(split.text, 60);
        const multiline = lines
          .map(
            (l, i) =>
              `${split.code}${i < lines.length - 1 ? '-' : ' '}${split.enhanced ? `${split.enhanced} ` : ''}${l}`,
          )
          .join('\n');
        t.match(
          classify(r({ code: split.code, text: multiline })),
          { action: rule.action, class: rule.class },
          `${label}: multi-line form`,
        );
      }
    }
  });
}

t.test('the rules cover every class the MTA is expected to recognise from reply text', async (t) => {
  const expected: BounceClass[] = [
    'unknown_user',
    'mailbox_full',
    'greylisted',
    'rate_limited',
    'spam',
    'blocklisted',
    'auth_failure',
    'too_large',
    'bad_domain',
    'relay_denied',
    'tls_required',
    'temporary',
    'policy',
  ];
  for (const c of expected) t.ok(byClass.has(c), `a rule for ${c}`);
  for (const c of byClass.keys()) t.ok((BOUNCE_CLASSES as readonly string[]).includes(c), `${c} is a BounceClass`);
});

t.test('no rule turns a 4yz into a bounce', async (t) => {
  // RFC 5321 §4.2.1: a 4yz says the server may yet accept. Each fail rule's quotes, re-coded as 4yz
  // (basic code and enhanced class alike), must come out deferred.
  for (const rule of fileRules.filter((r) => r.action === 'fail')) {
    for (const quoted of rule.replies) {
      t.equal(quoted[0], '5', `line ${rule.line}: a fail rule quotes a 5yz`);
      const split = splitForm(quoted);
      const four = new SmtpReply(split.code - 100, split.enhanced?.replace(/^5/, '4') ?? null, split.text);
      t.equal(classify(four).action, 'defer', `line ${rule.line} as ${four.code} ${four.enhanced ?? ''}`);
    }
  }
});

t.test('2xx delivers, whatever the text', async (t) => {
  t.same(classify(r({ code: 250, enhanced: '2.0.0', text: 'OK id=1rAbCd-000123-45' })), {
    action: 'deliver',
    class: 'delivered',
    message: 'Accepted by the receiving server',
  });
  t.equal(
    classify(r({ code: 250, text: '2.6.0 Message accepted, but Greylisted and spam and User unknown' })).action,
    'deliver',
  );
  t.equal(classify(r({ code: 251, text: 'User not local; will forward to <jane@example.net>' })).action, 'deliver');
});

t.test('no rule matches: the enhanced status code decides (RFC 3463)', async (t) => {
  const cases: Array<[SmtpReply, string, BounceClass]> = [
    [r({ code: 550, enhanced: '5.1.1', text: 'Nope' }), 'fail', 'unknown_user'],
    [r({ code: 450, enhanced: '4.1.1', text: 'Nope' }), 'defer', 'unknown_user'],
    [r({ code: 550, enhanced: '5.1.2', text: 'Nope' }), 'fail', 'bad_domain'],
    // RFC 7505 §4.1: what a client reports for a null MX domain.
    [r({ code: 556, enhanced: '5.1.10', text: 'Recipient address has null MX' }), 'fail', 'bad_domain'],
    [r({ code: 550, enhanced: '5.2.1', text: 'Nope' }), 'fail', 'unknown_user'],
    [r({ code: 450, enhanced: '4.2.1', text: 'Nope' }), 'defer', 'temporary'],
    // 5.2.2 is treated as permanent (see config/bounce-rules.txt), 4.2.2 as temporary.
    [r({ code: 552, enhanced: '5.2.2', text: 'Nope' }), 'fail', 'mailbox_full'],
    [r({ code: 452, enhanced: '4.2.2', text: 'Nope' }), 'defer', 'mailbox_full'],
    [r({ code: 552, enhanced: '5.3.4', text: 'Nope' }), 'fail', 'too_large'],
    [r({ code: 554, enhanced: '5.4.4', text: 'Nope' }), 'fail', 'bad_domain'],
    [r({ code: 554, enhanced: '5.4.6', text: 'Routing loop detected' }), 'fail', 'other'],
    [r({ code: 451, enhanced: '4.4.1', text: 'Nope' }), 'defer', 'connection'],
    // RFC 5321 §4.5.3.1.10: too many recipients is temporary even as 552.
    [r({ code: 552, enhanced: '5.5.3', text: 'Nope' }), 'defer', 'rate_limited'],
    [r({ code: 550, enhanced: '5.7.1', text: 'Nope' }), 'fail', 'policy'],
    [r({ code: 451, enhanced: '4.7.1', text: 'Nope' }), 'defer', 'policy'],
    [r({ code: 550, enhanced: '5.7.99', text: 'Nope' }), 'fail', 'policy'],
    [r({ code: 550, enhanced: '5.7.26', text: 'Nope' }), 'fail', 'auth_failure'],
    [r({ code: 550, enhanced: '5.2.9', text: 'Nope' }), 'fail', 'other'],
    [r({ code: 451, enhanced: '4.3.9', text: 'Nope' }), 'defer', 'temporary'],
  ];
  for (const [reply, action, cls] of cases) {
    t.match(classify(reply), { action, class: cls }, `${reply.code} ${reply.enhanced}`);
  }
  // A real reply no rule claims: Gmail's missing-PTR refusal, decided by 5.7.25 (RFC 7372).
  t.match(
    classify(
      parseReply(
        '550-5.7.25 [203.0.113.5] The IP address sending this message does not have a PTR record setup, or the corresponding forward DNS entry does not point to the sending IP. As a policy, Gmail does not accept messages from IPs with missing PTR records. For more information, go to https://support.google.com/mail/answer/81126#ip-practices 41be03b00d2f7-5e1a2b3c4d5sm123456a.12 - gsmtp',
      )!,
    ),
    { action: 'fail', class: 'auth_failure', message: /Reverse DNS/ },
  );
  t.match(
    classify(r({ code: 550, text: '5.1.1 Nope' })),
    { class: 'unknown_user' },
    'the enhanced code is read from the text when not given',
  );
  t.match(
    classify(r({ code: 550, text: '550-5.1.1 Nope\n550 5.1.1 Still nope' })),
    { class: 'unknown_user' },
    'and from a multi-line reply',
  );
  t.match(
    classify(r({ code: 550, enhanced: 'x.1.1', text: 'Nope' })),
    { class: 'other' },
    'a malformed enhanced code is ignored',
  );
});

t.test('an enhanced code that disagrees with the reply code is ignored (RFC 2034 §4)', async (t) => {
  t.same(classify(r({ code: 451, enhanced: '5.1.1', text: 'Nope' })), {
    action: 'defer',
    class: 'temporary',
    message: 'Temporary failure (451)',
  });
  t.same(classify(r({ code: 550, enhanced: '4.2.2', text: 'Nope' })), {
    action: 'fail',
    class: 'other',
    message: 'Permanent failure (550)',
  });
});

t.test('neither rule nor enhanced code: the basic reply code decides (RFC 5321 §4.2.1)', async (t) => {
  t.match(classify(r({ code: 421, text: 'mx.example.org Service not available, closing transmission channel' })), {
    action: 'defer',
    class: 'temporary',
  });
  t.match(classify(r({ code: 450, text: 'Requested mail action not taken: mailbox unavailable' })), {
    action: 'defer',
    class: 'temporary',
  });
  t.match(classify(r({ code: 554, text: 'Transaction failed' })), { action: 'fail', class: 'other' });
  t.match(classify(r({ code: 550, text: '' })), { action: 'fail', class: 'other' });
  t.match(
    classify(r({ code: 354, text: 'Start mail input; end with <CRLF>.<CRLF>' })),
    { action: 'defer', class: 'other' },
    '3yz is no final answer',
  );
  t.match(classify(r({ code: Number.NaN, text: 'garbage' })), { action: 'defer', class: 'other' });
  t.match(classify(r({ code: 999, text: 'garbage' })), { action: 'defer', class: 'other' });
});

t.test('a connection error defers with class connection', async (t) => {
  for (const e of [
    'connect ECONNREFUSED 192.0.2.1:25',
    'Connection timeout',
    'read ECONNRESET',
    'queryMx ENOTFOUND example.org',
  ]) {
    t.match(classify({ connectionError: e }), { action: 'defer', class: 'connection' }, e);
  }
});

t.test('rules match case-insensitively', async (t) => {
  const upper = '550 5.1.1 <JANE@EXAMPLE.ORG>: RECIPIENT ADDRESS REJECTED: USER UNKNOWN IN LOCAL RECIPIENT TABLE';
  t.match(classify(parseReply(upper)!), {
    action: 'fail',
    class: 'unknown_user',
    message: 'The mailbox does not exist',
  });
  t.match(classify(parseReply(upper.toLowerCase())!), {
    action: 'fail',
    class: 'unknown_user',
    message: 'The mailbox does not exist',
  });
  t.match(classify(r({ code: 451, text: 'gReYlIsTeD, please retry' })), { action: 'defer', class: 'greylisted' });
  // Without the rule, 5.7.1 would say policy: the text is what made it blocklisted.
  t.match(
    classify(
      r({
        code: 554,
        enhanced: '5.7.1',
        text: 'SERVICE UNAVAILABLE; CLIENT HOST [203.0.113.5] BLOCKED USING ZEN.SPAMHAUS.ORG',
      }),
    ),
    { action: 'defer', class: 'blocklisted' },
  );
});

t.test('rules come before the enhanced code', async (t) => {
  // Exchange's 5.1.10 is "recipient not found", not RFC 7505's null MX: the rule knows.
  t.match(
    classify(
      r({
        code: 550,
        enhanced: '5.1.10',
        text: 'RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup',
      }),
    ),
    { action: 'fail', class: 'unknown_user' },
  );
  t.match(classify(r({ code: 550, enhanced: '5.1.10', text: 'Recipient address has null MX' })), {
    action: 'fail',
    class: 'bad_domain',
  });
});

t.test('loadRules', async (t) => {
  const ok = ['# reply: 550 5.1.1 No such user here', 'no such user\tfail\tunknown_user\tGone'].join('\n');
  const rules = loadRules(ok);
  t.equal(rules.length, 1);
  t.match(rules[0], {
    line: 2,
    action: 'fail',
    class: 'unknown_user',
    message: 'Gone',
    replies: ['550 5.1.1 No such user here'],
  });
  t.same(classify(r({ code: 550, text: 'No such user here' }), rules), {
    action: 'fail',
    class: 'unknown_user',
    message: 'Gone',
    rule: 2,
  });
  t.same(
    classify(r({ code: 550, text: 'Something else' }), rules),
    { action: 'fail', class: 'other', message: 'Permanent failure (550)' },
    'a rules set is honoured as given',
  );
  t.equal(
    loadRules('a\t\t\tdefer\t\tgreylisted\t\tAligned with several tabs'.replace(/^/, '# reply: 451 a\n')).length,
    1,
    'runs of tabs separate fields',
  );
  t.same(loadRules('# only a comment\n\n'), [], 'comments and blank lines only');

  // A multi-line reply is matched as one line, code prefixes removed.
  const joined = loadRules('# reply: 550 5.1.1 foo bar\n^550 5\\.1\\.1 foo bar$\tfail\tunknown_user\tx');
  t.equal(classify(r({ code: 550, text: '550-5.1.1 foo\r\n550 5.1.1 bar' }), joined).message, 'x');

  const bad: Array<[string, number, RegExp]> = [
    ['# reply: 550 x\nx\tfail\tunknown_user', 2, /expected 4 TAB-separated fields/],
    ['# reply: 550 x\nx fail unknown_user message', 2, /expected 4 TAB-separated fields/],
    ['# reply: 550 x\nx\tfail\tunknown_user\tm\textra', 2, /expected 4 TAB-separated fields/],
    ['# reply: 550 x\n\n# reply: 550 (\n(\tfail\tunknown_user\tm', 4, /bad regex/],
    ['# reply: 550 x\nx\tbounce\tunknown_user\tm', 2, /action must be one of defer, fail/],
    ['# reply: 550 x\nx\tfail\tdelivered\tm', 2, /class must be one of/],
    ['# reply: 550 x\nx\tfail\tconnection\tm', 2, /class must be one of/],
    ['# reply: 550 x\nx\tfail\tno_such_class\tm', 2, /class must be one of/],
    ['# reply: 550 x\nx\tfail\tother\tm\ny\tfail\tother\tm', 3, /must be preceded by at least one "# reply:/],
    ['# just a comment\nx\tfail\tother\tm', 2, /must be preceded/],
    ['# reply: 550 y\nx\tfail\tother\tm', 2, /does not match its quoted reply "550 y"/],
    ['# reply: User unknown\nx\tfail\tother\tm', 1, /three-digit reply code/],
  ];
  for (const [text, line, why] of bad) {
    t.throws(
      () => loadRules(text, 'rules.txt'),
      { message: new RegExp(`^rules\\.txt line ${line}: .*${why.source}`) },
      why.source,
    );
  }
  t.throws(
    () => loadRules('x\tfail\tother\tm\n# reply: 550 x'.replace(/^/, '# reply: 550 x\n')),
    /have no rule under them/,
  );
});

// mail/auth-header-budget.ts: which received headers mailauth may read, and that the look itself is one pass.
import t from 'tap';
import {
  AUTH_FIELD_BUDGET,
  authHeaderProblem,
  MAX_ARC_FIELDS,
  MAX_DKIM_SIGNATURES,
} from '../../mail/auth-header-budget.js';

const header = (...fields: string[]) => Buffer.from(fields.map((f) => `${f}\r\n`).join(''), 'latin1');
const sig = (n: number) =>
  `DKIM-Signature: v=1; a=rsa-sha256; d=d${n}.example; s=s; h=from:to:subject; bh=${'A'.repeat(44)};` +
  `\r\n\tb=${'B'.repeat(344)}`;

t.test('an ordinary header, ARC chain and all, is well within the budget', async (t) => {
  const arcSet = (i: number) => [
    `ARC-Seal: i=${i}; a=rsa-sha256; t=1; cv=pass; d=google.com; s=arc-20160816;\r\n\tb=${'C'.repeat(344)}`,
    `ARC-Message-Signature: i=${i}; a=rsa-sha256; c=relaxed/relaxed; d=google.com; h=to:subject:from:date;` +
      `\r\n\tbh=${'D'.repeat(44)};\r\n\tb=${'E'.repeat(344)}`,
    `ARC-Authentication-Results: i=${i}; mx.google.com;` +
      '\r\n\tdkim=pass header.i=@example.com header.s=s header.b=abcdefgh;'.repeat(20),
  ];
  const received = Array.from(
    { length: 12 },
    (_, i) =>
      `Received: from h${i}.example (h${i}.example [192.0.2.${i}])\r\n\tby mx.example with ESMTPS id ${i};` +
      ' Tue, 1 Jul 2025 10:52:37 +0000',
  );
  const h = header(
    ...arcSet(3),
    ...arcSet(2),
    ...arcSet(1),
    sig(1),
    sig(2),
    ...received,
    'From: A <a@example.com>',
    'To: b@example.net',
    `References: ${'<id@example.com> '.repeat(400)}`,
    'Subject: hi',
  );
  t.equal(authHeaderProblem(h), null);
});

t.test('too many signatures, too many ARC fields, fields too long, a bare CR', async (t) => {
  const sigs = Array.from({ length: MAX_DKIM_SIGNATURES + 1 }, (_, i) => sig(i));
  t.equal(authHeaderProblem(header(...sigs.slice(1))), null, `${MAX_DKIM_SIGNATURES} are verified`);
  t.match(authHeaderProblem(header(...sigs)), /DKIM signatures/);
  const arc = Array.from({ length: MAX_ARC_FIELDS + 1 }, (_, i) => `ARC-Seal: i=${i}; cv=none`);
  t.equal(authHeaderProblem(header(...arc.slice(1))), null);
  t.match(authHeaderProblem(header(...arc)), /ARC fields/);
  const side = Math.ceil(Math.sqrt(AUTH_FIELD_BUDGET));
  t.equal(authHeaderProblem(header(`Received: ${'x'.repeat(side - 13)}`)), null, 'one field just within');
  t.match(authHeaderProblem(header(`Received: ${'x'.repeat(side)}`)), /too long/, 'one field over');
  t.match(
    authHeaderProblem(header(`dkim-signature :${' \t'.repeat(side / 2)}x`)),
    /too long/,
    'names any case, WSP before ":"',
  );
  t.equal(
    authHeaderProblem(header(`X-Long: ${'x'.repeat(side * 4)}`, `To: ${'y'.repeat(side * 4)}`)),
    null,
    'fields mailauth does not parse',
  );
  t.match(authHeaderProblem(header('Subject: a\rb')), /bare CR/);
});

// Lines with no colon and one colon at the very end: a search for each field's colon from its start would scan
// to the end from every line. A 30 s timeout judges, no time is measured.
t.test('a megabyte of lines without a colon is read once', { timeout: 30_000 }, async (t) => {
  t.equal(authHeaderProblem(Buffer.from(`${'x\r\n'.repeat(350_000)}From: a@b\r\n`, 'latin1')), null);
});

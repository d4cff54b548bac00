// imap/render-envelope.ts and imap/render-bodystructure.ts: ENVELOPE, BODY and BODYSTRUCTURE (RFC 3501
// §7.4.2) of the fixtures in test/fixtures/mime/, parsed with mail/mime-tree.ts. Every expected string
// was written from the fixture's bytes and RFC 3501 §9's grammar (sizes and line counts counted on the
// raw parts, a part's last line break belonging to the boundary after it, RFC 2046 §5.1.1).
import t from 'tap';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseMimeTree } from '../../mail/mime-tree.js';
import { envelopeValue } from '../../imap/render-envelope.js';
import { bodyValue } from '../../imap/render-bodystructure.js';
import { encodeValue } from '../../imap/response.js';

const DIR = fileURLToPath(new URL('../fixtures/mime/', import.meta.url));
const tree = (name: string) => parseMimeTree(readFileSync(DIR + name));
const envelope = (name: string) => encodeValue(envelopeValue(tree(name).envelope)).toString('utf8');
const body = (name: string, ext: boolean) => encodeValue(bodyValue(tree(name).body, ext)).toString('utf8');

t.test('simple.eml: a single text/plain part', async (t) => {
  t.equal(
    envelope('simple.eml'),
    '("Tue, 4 Jun 2024 09:30:00 +0200 (CEST)" "Lunch on Thursday?" ' +
      '(("Alice Example" NIL "alice" "example.org")) (("Alice Example" NIL "alice" "example.org")) ' +
      '(("Alice Example" NIL "alice" "example.org")) ' +
      '((NIL NIL "bob" "example.com")("Carol, Q." NIL "carol" "example.net")) NIL NIL ' +
      '"<plan-7@example.com>" "<lunch-1@example.org>")',
    'Sender and Reply-To default to From; the folded Subject is unfolded; addresses side by side',
  );
  // 60 octets: "Hi Bob,"(9) + CRLF(2) + "are we still on for lunch on Thursday?"(40) + CRLF(2) + "Alice"(7).
  t.equal(body('simple.eml', false), '("text" "plain" ("charset" "us-ascii") NIL NIL "7BIT" 60 5)');
  t.equal(body('simple.eml', true), '("text" "plain" ("charset" "us-ascii") NIL NIL "7BIT" 60 5 NIL NIL NIL NIL)');
});

t.test('alternative.eml, and what Dovecot answers for it', async (t) => {
  t.equal(
    envelope('alternative.eml'),
    '("Wed, 05 Jun 2024 12:00:00 +0000" "Offers" ((NIL NIL "news" "shop.example")) ' +
      '((NIL NIL "news" "shop.example")) ((NIL NIL "news" "shop.example")) ((NIL NIL "reader" "example.com")) ' +
      'NIL NIL NIL "<offers@shop.example>")',
  );
  t.equal(
    body('alternative.eml', false),
    '(("text" "plain" ("charset" "utf-8") NIL NIL "quoted-printable" 50 2)' +
      '("text" "html" ("charset" "utf-8") NIL NIL "quoted-printable" 89 1) "alternative")',
  );
  // The independent check. Dovecot writes a multipart's parts with no space between them (RFC 3501 §9
  // body-type-mpart = 1*body SP media-subtype), every leaf's body-ext-1part in full as "NIL NIL NIL NIL"
  // (md5, disposition, language, location), and after the subtype the Content-Type parameters then
  // NIL disposition, language and location. Part 1: "Caf=C3=A9 offers this week: 20% off every=" (42) +
  // CRLF + "thing." = 50 octets on 2 lines; part 2 is one 89-octet line; the preamble is no part.
  t.equal(
    body('alternative.eml', true),
    '(("text" "plain" ("charset" "utf-8") NIL NIL "quoted-printable" 50 2 NIL NIL NIL NIL)' +
      '("text" "html" ("charset" "utf-8") NIL NIL "quoted-printable" 89 1 NIL NIL NIL NIL) ' +
      '"alternative" ("boundary" "alt-1") NIL NIL NIL)',
  );
});

t.test('mixed-attachments.eml: nested multiparts and every extension field', async (t) => {
  t.equal(
    body('mixed-attachments.eml', false),
    '((("text" "html" ("charset" "us-ascii") NIL NIL "7BIT" 55 1)' +
      '("image" "png" ("name" "chart.png") "<chart@example.org>" NIL "base64" 274) "related")' +
      '("application" "pdf" ("name" "report.pdf") NIL "The report" "base64" 1062) "mixed")',
    'BODY: no extension data at any level, and no line count for non-text parts',
  );
  t.equal(
    body('mixed-attachments.eml', true),
    '((("text" "html" ("charset" "us-ascii") NIL NIL "7BIT" 55 1 NIL NIL NIL NIL)' +
      '("image" "png" ("name" "chart.png") "<chart@example.org>" NIL "base64" 274 NIL ("inline" NIL) NIL NIL) ' +
      '"related" ("boundary" "rel") NIL NIL NIL)' +
      '("application" "pdf" ("name" "report.pdf") NIL "The report" "base64" 1062 "Q2hlY2sgSW50ZWdyaXR5IQ==" ' +
      '("attachment" ("filename*" "utf-8\'\'R%C3%A9sum%C3%A9%20of%20June.pdf" "size" "777")) ("en" "fr") ' +
      '"https://example.org/report.pdf") "mixed" ("boundary" "mix") NIL NIL NIL)',
    'MD5, a disposition without parameters, RFC 2231 continuations joined, two languages as a list, location',
  );
  t.equal(
    envelope('mixed-attachments.eml'),
    '("Thu, 6 Jun 2024 08:00:00 -0400" "Monthly report" (("Dept. Reports" NIL "reports" "example.org")) ' +
      '(("Dept. Reports" NIL "reports" "example.org")) (("Dept. Reports" NIL "reports" "example.org")) ' +
      '((NIL NIL "team" "example.com")) NIL NIL NIL "<report-6@example.org>")',
  );
});

t.test('nested-rfc822.eml: message/rfc822 carries envelope, body and lines of the message inside', async (t) => {
  const inner =
    '("Wed, 05 Jun 2024 12:00:00 +0000" "=?utf-8?q?Caf=C3=A9?= Offers" ((NIL NIL "news" "shop.example")) ' +
    '((NIL NIL "news" "shop.example")) ((NIL NIL "news" "shop.example")) ((NIL NIL "bob" "example.com")) ' +
    'NIL NIL NIL "<offers@shop.example>")';
  // Part 2 is 380 octets on 17 lines (the blank line before "--outer" is the delimiter's); part 3 is
  // "Subject: single part inside" CRLF CRLF "Just text." = 41 octets on 3 lines.
  t.equal(
    body('nested-rfc822.eml', false),
    '(("text" "plain" ("charset" "us-ascii") NIL NIL "7BIT" 10 1)' +
      `("message" "rfc822" NIL NIL NIL "7BIT" 380 ${inner} ` +
      '(("text" "plain" ("charset" "utf-8") NIL NIL "7BIT" 12 1)("text" "html" ("charset" "utf-8") NIL NIL ' +
      '"7BIT" 18 1) "alternative") 17)' +
      '("message" "rfc822" NIL NIL NIL "7BIT" 41 (NIL "single part inside" NIL NIL NIL NIL NIL NIL NIL NIL) ' +
      '("text" "plain" ("charset" "us-ascii") NIL NIL "7BIT" 10 1) 3) "mixed")',
  );
  t.equal(
    body('nested-rfc822.eml', true),
    '(("text" "plain" ("charset" "us-ascii") NIL NIL "7BIT" 10 1 NIL NIL NIL NIL)' +
      `("message" "rfc822" NIL NIL NIL "7BIT" 380 ${inner} ` +
      '(("text" "plain" ("charset" "utf-8") NIL NIL "7BIT" 12 1 NIL NIL NIL NIL)' +
      '("text" "html" ("charset" "utf-8") NIL NIL "7BIT" 18 1 NIL NIL NIL NIL) ' +
      '"alternative" ("boundary" "inner") NIL NIL NIL) 17 NIL ("attachment" ("filename" "offers.eml")) NIL NIL)' +
      '("message" "rfc822" NIL NIL NIL "7BIT" 41 (NIL "single part inside" NIL NIL NIL NIL NIL NIL NIL NIL) ' +
      '("text" "plain" ("charset" "us-ascii") NIL NIL "7BIT" 10 1 NIL NIL NIL NIL) 3 NIL NIL NIL NIL) ' +
      '"mixed" ("boundary" "outer") NIL NIL NIL)',
    'the inner structure is extensible too, and the rfc822 part has its own extension data after the lines',
  );
});

t.test('encoded-words.eml: raw encoded words, groups, 8-bit names as literals', async (t) => {
  t.equal(
    envelope('encoded-words.eml'),
    '("7 Jun 24 10:00 GMT" "=?UTF-8?B?8J+Ys8Kg?= =?UTF-8?B?w6k=?= =?UTF-8?Q?t=C3=A9?= plain (not a comment)" ' +
      '(("=?ISO-8859-1?Q?Andr=E9?= Pirard" NIL "PIRARD" "vm1.ulg.ac.be")) ' +
      '(("=?ISO-8859-1?Q?Andr=E9?= Pirard" NIL "PIRARD" "vm1.ulg.ac.be")) ' +
      '((NIL NIL "list" "example.org")) ' +
      // RFC 3501 §7.4.2: a group opens with (NIL NIL name NIL) and closes with (NIL NIL NIL NIL).
      '((NIL NIL "undisclosed-recipients" NIL)(NIL NIL NIL NIL)) ' +
      '((NIL NIL "Friends" NIL)("=?UTF-8?B?w4lsb2lzZQ==?=" NIL "eloise" "example.fr")' +
      '({8}\r\nZoë Raw NIL "zoe" "example.de")(NIL NIL NIL NIL)(NIL NIL "plain" "example.com")) NIL NIL ' +
      '"<enc@example.org>")',
    'a Sender of only a comment is no address, so it takes From; "Zoë" is 8-bit, so a literal',
  );
  t.equal(
    body('encoded-words.eml', true),
    '("text" "plain" ("charset" "iso-8859-1") NIL NIL "8bit" 12 1 NIL NIL NIL NIL)',
  );
});

t.test('NIL rules: no header at all, defaults of RFC 2045 §5.2', async (t) => {
  t.equal(envelope('no-headers.eml'), '(NIL NIL NIL NIL NIL NIL NIL NIL NIL NIL)');
  t.equal(body('no-headers.eml', false), '("text" "plain" ("charset" "us-ascii") NIL NIL "7BIT" 38 1)');
  // A Content-Type with a parameter but no charset: the text default is added after the others.
  t.equal(
    body('bare-lf.eml', false),
    '(("text" "plain" ("charset" "us-ascii") NIL NIL "7BIT" 18 2)' +
      '("text" "csv" ("name" "data.csv" "charset" "us-ascii") NIL NIL "7BIT" 7 2) "mixed")',
  );
});

t.test('a single language is a string, several a list; no parameters is NIL', async (t) => {
  const raw = Buffer.from(
    'Content-Type: application/octet-stream\r\nContent-Language: de\r\n' +
      'Content-Disposition: inline; filename=a.bin\r\n\r\nxyz',
  );
  t.equal(
    encodeValue(bodyValue(parseMimeTree(raw).body, true)).toString(),
    '("application" "octet-stream" NIL NIL NIL "7BIT" 3 NIL ("inline" ("filename" "a.bin")) "de" NIL)',
  );
});

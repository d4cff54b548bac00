// The webmail in a real browser (headless Chromium driven by playwright-core, one launch for the file): sign in, read a
// message delivered over SMTP to our MX, see a new one arrive without a reload, compose and send a message that reaches
// an SMTP sink with its copy in Sent, a folder's list that answers late and does not replace the one picked after it, a
// hostile HTML mail whose script does not run and whose remote image does not load, and the page's refusals (a CSRF
// attempt, another inbox's message). Each step leaves a screenshot in the test's output directory.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import { chromium, type Page } from 'playwright-core';
import { swaks } from '../helpers/smtp-client.js';
import { startSmtpSink } from '../helpers/smtp-sink.js';
import { PASSWORD, putMessage, webmailEnv, webmailInbox } from '../helpers/webmail.js';

const CHROMIUM = process.env.SVC_CHROMIUM ?? '/usr/bin/chromium';
// axe-core, the accessibility rules engine browsers' own audits use, run in the page (WCAG 2.1 A and AA).
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const shots = path.resolve('.tap', 'webmail-screenshots');

t.test('the webmail in Chromium', async (t) => {
  const sink = await startSmtpSink(t);
  const e = await webmailEnv(t, { mta: true, env: { SVC_OUTBOUND_PORT: String(sink.port) } });
  const { svc, zone } = e;
  zone.mx('dest.test', 10, 'mx.dest.test').a('mx.dest.test', '127.0.0.1');
  const alice = await webmailInbox(e, 'alice');
  const bob = await webmailInbox(e, 'bob');
  const bobsId = await putMessage(e, bob.mailboxes.INBOX!.id, 'From: x@example.com\nSubject: Bob only\n\nsecret\n');

  // A remote image server on loopback that records whether anything fetched from it.
  const fetched: string[] = [];
  const images = http.createServer((req, res) => {
    fetched.push(req.url ?? '');
    res.end('');
  });
  await new Promise<void>((r) => images.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => images.close(() => r())));
  const imagePort = (images.address() as { port: number }).port;

  const profile = await mkdtemp(path.join(os.tmpdir(), 'webmail-chromium-'));
  // A fresh profile directory (playwright passes it as --user-data-dir).
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    viewport: { width: 390, height: 844 },
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--host-resolver-rules=MAP * 127.0.0.1',
    ],
  });
  t.teardown(async () => {
    await context.close();
    await rm(profile, { recursive: true, force: true });
  });
  const page = await context.newPage();
  const pageErrors: string[] = [];
  page.on('pageerror', (err) => pageErrors.push(err.message));
  const dialogs: string[] = [];
  page.on('dialog', (d) => {
    dialogs.push(d.message());
    void d.dismiss();
  });
  const shot = (p: Page, name: string) => p.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true });
  /** The page's WCAG 2.1 A/AA violations, as "rule: first offending element" lines (none expected). */
  const audit = async (p: Page): Promise<string[]> => {
    // Through the debugger protocol, which the page's Content-Security-Policy does not govern.
    await p.evaluate(AXE);
    const violations = await p.evaluate(async () => {
      const g = globalThis as unknown as {
        axe: { run(ctx: unknown, o: unknown): Promise<unknown> };
        document: unknown;
      };
      const r = (await g.axe.run(g.document, {
        runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] },
      })) as { violations: { id: string; help: string; nodes: { html: string }[] }[] };
      return r.violations.map((v) => `${v.id} (${v.help}): ${v.nodes[0]?.html ?? ''}`);
    });
    return violations;
  };
  // The webmail host of the configuration, resolved to loopback by the browser.
  const base = `http://${svc.running.ctx.config.webmailHost}:${svc.running.ports.http}`;

  // Delivered over SMTP to our MX before the sign-in.
  const delivered = await swaks(svc.running.ports.smtp!, {
    from: 'ada@sender.example',
    to: alice.address,
    data: `From: Ada <ada@sender.example>\r\nTo: ${alice.address}\r\nSubject: Over SMTP\r\n\r\nDelivered by swaks.\r\n`,
  });
  t.equal(delivered.code, 0, 'swaks delivered');

  await t.test('sign in and read a message delivered over SMTP', async (t) => {
    await page.goto(`${base}/`);
    await page.getByLabel('Email address').waitFor();
    t.same(await audit(page), [], 'the sign-in page: no WCAG 2.1 A/AA violation');
    // By keyboard alone: the field, Tab to the next, Enter submits.
    await page.getByLabel('Email address').focus();
    await page.keyboard.type(alice.address);
    await page.keyboard.press('Tab');
    t.equal(
      await page.evaluate(
        () => (globalThis as unknown as { document: { activeElement: { id: string } } }).document.activeElement.id,
      ),
      await page.getByLabel('Password').getAttribute('id'),
      'Tab reaches the password',
    );
    await page.keyboard.type(PASSWORD);
    await page.keyboard.press('Enter');
    await page.getByRole('button', { name: /Inbox, 1 unread/ }).waitFor();
    await shot(page, '1-signed-in');
    t.same(await audit(page), [], 'the folder view: no WCAG 2.1 A/AA violation');
    await page.getByRole('button', { name: /Over SMTP/ }).focus();
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Over SMTP' }).waitFor();
    t.match(await page.locator('.body-text').textContent(), /Delivered by swaks\./);
    await shot(page, '2-read');
    t.same(await audit(page), [], 'the reading view: no WCAG 2.1 A/AA violation');
    await page.getByRole('button', { name: 'Back' }).click();
    t.ok(await page.getByRole('button', { name: /^Inbox$/ }).isVisible(), 'read: no unread count left');
  });

  await t.test('a new message appears without a reload', async (t) => {
    await page.waitForSelector('body[data-live="on"]');
    const url = page.url();
    await swaks(svc.running.ports.smtp!, {
      from: 'eve@sender.example',
      to: alice.address,
      data: `From: Eve <eve@sender.example>\r\nTo: ${alice.address}\r\nSubject: Live one\r\n\r\nJust now.\r\n`,
    });
    await page.getByRole('button', { name: /Live one/ }).waitFor({ timeout: 10_000 });
    t.equal(page.url(), url, 'no navigation');
    t.ok(await page.getByRole('button', { name: /Inbox, 1 unread/ }).isVisible());
    await shot(page, '3-live');
  });

  await t.test('compose and send: the sink gets it, Sent keeps a copy', async (t) => {
    await page.getByRole('button', { name: 'Compose' }).click();
    await page.getByLabel('To').fill('friend@dest.test');
    await page.getByLabel('Subject').fill('From the webmail');
    await page.getByRole('textbox', { name: 'Message', exact: true }).fill('Hello from a browser.');
    await page.getByLabel('Attach files').setInputFiles({
      name: 'note.txt',
      mimeType: 'text/plain',
      buffer: Buffer.from('attached words'),
    });
    await shot(page, '4-compose');
    t.same(await audit(page), [], 'the compose view: no WCAG 2.1 A/AA violation');
    await page.getByRole('button', { name: 'Send' }).click();
    const [got] = await sink.waitForMessages(1);
    t.same(got!.rcptTo, ['friend@dest.test']);
    const raw = got!.raw.toString('latin1');
    t.match(raw, /Subject: From the webmail/);
    t.match(raw, new RegExp(`From: ${alice.address}`));
    t.match(raw, /filename=note\.txt/);
    await page.getByRole('button', { name: /^Sent/ }).click();
    await page.getByRole('button', { name: /From the webmail/ }).waitFor();
    await shot(page, '5-sent');
  });

  await t.test("a folder's list answering late does not replace the folder picked after it", async (t) => {
    // Inbox is picked and its list held back; Sent is picked and answers; then Inbox's answer arrives.
    const LIST = /\/webmail\/v1\/folders\/[^/]+\/messages/;
    type Held = { url: string; release: () => Promise<void> };
    let hold: ((held: Held) => void) | undefined;
    const heldNow = new Promise<Held>((r) => (hold = r));
    await page.route(LIST, async (route) => {
      const first = hold;
      hold = undefined;
      if (!first) return route.continue();
      first({ url: route.request().url(), release: () => route.continue() });
    });
    try {
      await page.getByRole('button', { name: /^Inbox/ }).click();
      const inbox = await heldNow;
      const sentAnswered = page.waitForResponse((r) => LIST.test(r.url()) && r.url() !== inbox.url);
      await page.getByRole('button', { name: /^Sent/ }).click();
      await (await sentAnswered).finished();
      const inboxAnswered = page.waitForResponse((r) => r.url() === inbox.url);
      await inbox.release();
      await (await inboxAnswered).finished();
      // The page's handling of the late answer: its body read and applied, then a render.
      await page.evaluate(() => new Promise((r) => setTimeout(r, 200)));
      t.ok(await page.getByRole('button', { name: /From the webmail/ }).isVisible(), "Sent's list is shown");
      t.notOk(await page.getByRole('button', { name: /Live one/ }).isVisible(), "the inbox's list is not");
    } finally {
      await page.unroute(LIST);
    }
  });

  await t.test('a draft keeps its attachment when opened again and sent', async (t) => {
    const bytes = Buffer.from([0x25, 0x50, 0x44, 0x46, 0x00, 0xff, 0x10, 0x80, 0x0d, 0x0a]);
    await page.getByRole('button', { name: 'Compose' }).click();
    await page.getByLabel('To').fill('planner@dest.test');
    await page.getByLabel('Subject').fill('Draft with a file');
    await page
      .getByLabel('Attach files')
      .setInputFiles({ name: 'plan.pdf', mimeType: 'application/pdf', buffer: bytes });
    await page.getByRole('button', { name: 'Save draft' }).click();
    await page.getByText(/Draft saved/).waitFor();
    await page.getByRole('button', { name: 'Close' }).click();
    await page.getByRole('button', { name: /^Drafts/ }).click();
    await page.getByRole('button', { name: /Draft with a file/ }).click();
    await page.getByRole('list', { name: 'Attached files' }).getByText('plan.pdf').waitFor();
    await shot(page, '5b-draft-reopened');
    await page.getByRole('button', { name: 'Send' }).click();
    const got = (await sink.waitForMessages(2))[1]!;
    t.same(got.rcptTo, ['planner@dest.test']);
    const raw = got.raw.toString('latin1');
    t.match(raw, /filename=plan\.pdf/);
    const part = /filename=plan\.pdf[^]*?\r\n\r\n([A-Za-z0-9+/=\r\n]+?)\r\n--/.exec(raw);
    t.same(part && Buffer.from(part[1]!.replace(/\r\n/g, ''), 'base64'), bytes, 'the bytes unchanged');
  });

  await t.test('hostile HTML: its script does not run and its remote image does not load', async (t) => {
    const hostile = [
      'From: Mallory <m@evil.example>',
      `To: ${alice.address}`,
      'Subject: Hostile',
      'MIME-Version: 1.0',
      'Content-Type: text/html; charset=utf-8',
      '',
      `<p id="x">Look<script>alert('script ran')</script></p><img src="http://img.example:${imagePort}/pixel.gif">` +
        `<img src=x onerror="alert('handler ran')"><svg onload="alert('svg ran')"></svg>`,
      '',
    ].join('\r\n');
    await putMessage(e, alice.mailboxes.INBOX!.id, hostile);
    await page.getByRole('button', { name: /^Inbox/ }).click();
    await page.getByRole('button', { name: /Hostile/ }).click();
    const frame = page.frameLocator('iframe[title="Message content"]');
    await frame.getByText('Look').waitFor();
    t.equal(await frame.locator('p').first().textContent(), 'Look', 'the script element is gone');
    await page.getByText('Remote images are blocked.').waitFor();
    await shot(page, '6-hostile');
    t.same(dialogs, [], 'no script ran');
    t.same(fetched, [], 'the remote image was not fetched');
  });

  await t.test('a link in a received message opens in a tab of its own', async (t) => {
    const linked = [
      'From: News <n@news.example>',
      `To: ${alice.address}`,
      'Subject: With a link',
      'MIME-Version: 1.0',
      'Content-Type: text/html; charset=utf-8',
      '',
      `<p>Read <a href="http://site.example:${imagePort}/article?id=7">the article</a>.</p>`,
      '',
    ].join('\r\n');
    await putMessage(e, alice.mailboxes.INBOX!.id, linked);
    await page.getByRole('button', { name: /^Inbox/ }).click();
    await page.getByRole('button', { name: /With a link/ }).click();
    const frame = page.frameLocator('iframe[title="Message content"]');
    const [tab] = await Promise.all([
      context.waitForEvent('page'),
      frame.getByRole('link', { name: 'the article' }).click(),
    ]);
    await tab.waitForLoadState();
    t.equal(tab.url(), `http://site.example:${imagePort}/article?id=7`, 'the link opened in a new tab');
    t.ok(fetched.includes('/article?id=7'), 'and the page was fetched');
    t.equal(page.url().startsWith(base), true, 'the webmail itself stayed where it was');
    await tab.close();
  });

  await t.test("the page's own requests: a CSRF attempt and another inbox's message are refused", async (t) => {
    const statuses = await page.evaluate(
      async ([bobs]) => {
        const noToken = await fetch('/webmail/v1/folders/00000000-0000-0000-0000-000000000000/empty', {
          method: 'POST',
        });
        const other = await fetch(`/webmail/v1/messages/${bobs}`);
        const otherHtml = await fetch(`/webmail/v1/messages/${bobs}/html`);
        return [noToken.status, other.status, otherHtml.status];
      },
      [bobsId],
    );
    t.same(statuses, [403, 404, 404]);
    // A page of another site posting to the webmail: the cookie is SameSite=Strict and the origin is checked.
    const evil = await context.newPage();
    await evil.goto(`http://evil.example:${svc.running.ports.http}/nothing`).catch(() => {});
    const cross = await evil.evaluate(async (target) => {
      try {
        const r = await fetch(target, { method: 'DELETE', credentials: 'include', mode: 'no-cors' });
        return r.type;
      } catch (err) {
        return String(err);
      }
    }, `${base}/webmail/v1/session`);
    t.ok(cross, 'the cross-site request was made');
    const still = await page.evaluate(async () => (await fetch('/webmail/v1/folders')).status);
    t.equal(still, 200, 'the session survived the cross-site attempt');
    await shot(page, '7-after-csrf');
  });

  t.same(pageErrors, [], 'no errors in the page');
});

// @ts-check
// The webmail app (docs/api.md §4.15): Preact and htm as ES modules through the page's import map, no build.
// Sign in; folders with unread counts; a folder's messages, paged and searchable; reading (text, or the HTML in
// a sandboxed frame served by the server, remote images on request); compose, reply, reply all, forward with
// attachments, kept in Drafts while written; flags, moves, Trash; the inbox's password; new mail live through
// server-sent events. Every control is a real button, link or labelled field, so keyboards and screen readers
// reach it.
import { h, render } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import htm from 'htm';
import { api, ApiError, readAttachment, readStoredAttachment, setCsrf } from './api.js';

const html = htm.bind(h);

/**
 * @typedef {{ name: string | null, address: string }} Address
 * @typedef {{ id: string, name: string, role: string | null, total: number, unread: number }} Folder
 * @typedef {{ id: string, folderId: string, subject: string, from: Address[], to: Address[], date: string,
 *   preview: string, seen: boolean, flagged: boolean, answered: boolean, hasAttachments: boolean, size: number }} Item
 * @typedef {Item & { cc: Address[], replyTo: Address[], messageIdHeader: string | null, references: string[],
 *   text: string, hasHtml: boolean, remoteImages: boolean,
 *   attachments: { part: string, filename: string, contentType: string, size: number }[] }} Message
 * @typedef {{ address: string, csrfToken: string, canSend: boolean, cannotSendReason: string | null }} Session
 * @typedef {{ to: string, cc: string, subject: string, text: string, inReplyTo?: string, references?: string[],
 *   answering?: string, draftId?: string,
 *   attachments: { filename: string, contentType: string, contentBase64: string }[] }} Draft
 */

const PAGE_SIZE = 25;

/** @param {Address} a */
const who = (a) => (a.name ? `${a.name} <${a.address}>` : a.address);
/** @param {Address[]} l */
const whoList = (l) => l.map(who).join(', ');
/** @param {string} iso */
const when = (iso) => new Date(iso).toLocaleString();
/** @param {string} s */
const splitAddresses = (s) =>
  s
    .split(/[,;\n]/)
    .map((x) => x.trim())
    .filter(Boolean);
/** @param {Folder} f */
const folderLabel = (f) => (f.role === 'inbox' ? 'Inbox' : f.name);

/** @param {{ onSignedIn: (s: Session) => void }} props */
function SignIn({ onSignedIn }) {
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  /** @param {SubmitEvent} e */
  const submit = async (e) => {
    e.preventDefault();
    const form = /** @type {HTMLFormElement} */ (e.currentTarget);
    const data = new FormData(form);
    setBusy(true);
    setError('');
    try {
      const out = await api('POST', '/session', {
        address: String(data.get('address')),
        password: String(data.get('password')),
      });
      setCsrf(out.csrfToken);
      onSignedIn(await api('GET', '/session'));
    } catch (err) {
      setError(err instanceof ApiError ? err.message : 'Sign-in failed.');
    } finally {
      setBusy(false);
    }
  };
  return html`<main class="signin">
    <h1>Webmail</h1>
    <form onSubmit=${submit} aria-label="Sign in">
      <label for="address">Email address</label>
      <input id="address" name="address" type="email" autocomplete="username" required />
      <label for="password">Password</label>
      <input id="password" name="password" type="password" autocomplete="current-password" required />
      ${error && html`<p role="alert" class="error">${error}</p>`}
      <button type="submit" disabled=${busy}>Sign in</button>
    </form>
  </main>`;
}

/**
 * @param {{ folders: Folder[], current: string | null, onPick: (id: string) => void,
 *   onEmpty: (f: Folder) => void }} props
 */
function FolderList({ folders, current, onPick, onEmpty }) {
  return html`<nav aria-label="Folders" class="folders">
    <ul>
      ${folders.map(
        (f) =>
          html`<li key=${f.id}>
            <button
              type="button"
              class="folder"
              aria-current=${f.id === current ? 'page' : undefined}
              onClick=${() => onPick(f.id)}
            >
              ${
                // Named from its own text, in one piece, so that the name holds what is seen ("Inbox, 2 unread").
                f.unread
                  ? html`<span class="visually-hidden">${folderLabel(f)}, ${f.unread} unread</span
                      ><span aria-hidden="true">${folderLabel(f)}</span
                      ><span class="count" aria-hidden="true">${f.unread}</span>`
                  : html`<span>${folderLabel(f)}</span>`
              }
            </button>
            ${
              (f.role === 'trash' || f.role === 'junk') && f.total > 0
                ? html`<button
                    type="button"
                    class="small"
                    onClick=${() => onEmpty(f)}
                    aria-label=${`Empty ${folderLabel(f)}`}
                  >
                    Empty
                  </button>`
                : ''
            }
          </li>`,
      )}
    </ul>
  </nav>`;
}

/**
 * @param {{ folder: Folder | null, items: Item[], total: number, page: number, query: string,
 *   onQuery: (q: string) => void, onPage: (p: number) => void, onOpen: (id: string) => void }} props
 */
function MessageList({ folder, items, total, page, query, onQuery, onPage, onOpen }) {
  const pages = Math.max(1, Math.ceil(total / PAGE_SIZE));
  /** @param {SubmitEvent} e */
  const search = (e) => {
    e.preventDefault();
    const data = new FormData(/** @type {HTMLFormElement} */ (e.currentTarget));
    onQuery(String(data.get('q') ?? ''));
  };
  return html`<section class="list" aria-label=${`Messages in ${folder ? folderLabel(folder) : ''}`}>
    <form role="search" onSubmit=${search} class="search">
      <label for="q" class="visually-hidden">Search messages</label>
      <input id="q" name="q" type="search" placeholder="Search" value=${query} />
      <button type="submit">Search</button>
    </form>
    <p class="status" aria-live="polite">
      ${total} message${total === 1 ? '' : 's'}${query ? ` matching “${query}”` : ''}
    </p>
    <ul class="messages">
      ${items.map(
        // Each button is named by its own text (no aria-label that would say other than what is seen); the
        // glyphs are said in words to a screen reader.
        (m) =>
          html`<li key=${m.id}>
            <button
              type="button"
              class=${`message ${m.seen ? 'read' : 'unread'}`}
              data-id=${m.id}
              onClick=${() => onOpen(m.id)}
            >
              <span class="from"
                >${m.seen ? '' : html`<span class="dot" aria-hidden="true">●</span> `}<span class="visually-hidden"
                  >${m.seen ? '' : 'Unread. '}${m.flagged ? 'Flagged. ' : ''}${
                    folder?.role === 'sent' || folder?.role === 'drafts' ? 'To ' : 'From '
                  }</span
                >${
                  (folder?.role === 'sent' || folder?.role === 'drafts' ? whoList(m.to) : whoList(m.from)) || 'unknown'
                }</span
              >
              <span class="subject"
                ><span aria-hidden="true">${m.flagged ? '⚑ ' : ''}</span>${m.subject || '(no subject)'}${
                  m.hasAttachments
                    ? html`<span aria-hidden="true"> 📎</span><span class="visually-hidden">, with attachments</span>`
                    : ''
                }</span
              >
              <span class="preview">${m.preview}</span>
              <time datetime=${m.date}>${when(m.date)}</time>
            </button>
          </li>`,
      )}
    </ul>
    <nav aria-label="Pages" class="pager">
      <button type="button" disabled=${page <= 1} onClick=${() => onPage(page - 1)}>Newer</button>
      <span>Page ${page} of ${pages}</span>
      <button type="button" disabled=${page >= pages} onClick=${() => onPage(page + 1)}>Older</button>
    </nav>
  </section>`;
}

/**
 * @param {{ message: Message, folders: Folder[], onBack: () => void, onChanged: () => void,
 *   onCompose: (d: Draft) => void, onGone: () => void }} props
 */
function Reader({ message: m, folders, onBack, onChanged, onCompose, onGone }) {
  const [seen, setSeen] = useState(m.seen);
  const [flagged, setFlagged] = useState(m.flagged);
  const [images, setImages] = useState(false);
  const [showHtml, setShowHtml] = useState(m.hasHtml);
  const [error, setError] = useState('');
  useEffect(() => {
    setSeen(m.seen);
    setFlagged(m.flagged);
    setImages(false);
    setShowHtml(m.hasHtml);
  }, [m.id]);
  /** @param {() => Promise<void>} f */
  const act = (f) => f().catch((err) => setError(err instanceof ApiError ? err.message : String(err)));
  const toggleSeen = () =>
    act(async () => {
      const out = await api('PATCH', `/messages/${m.id}`, { seen: !seen });
      setSeen(out.seen);
      onChanged();
    });
  const toggleFlag = () =>
    act(async () => {
      const out = await api('PATCH', `/messages/${m.id}`, { flagged: !flagged });
      setFlagged(out.flagged);
      onChanged();
    });
  const remove = () =>
    act(async () => {
      await api('DELETE', `/messages/${m.id}`);
      onGone();
    });
  /** @param {Event} e */
  const move = (e) => {
    const to = /** @type {HTMLSelectElement} */ (e.currentTarget).value;
    if (to) act(async () => (await api('POST', `/messages/${m.id}/move`, { folderId: to }), onGone()));
  };
  const quote = () =>
    `\n\nOn ${when(m.date)}, ${whoList(m.from)} wrote:\n` +
    m.text
      .split('\n')
      .map((l) => `> ${l}`)
      .join('\n');
  const refs = [...m.references, ...(m.messageIdHeader ? [m.messageIdHeader] : [])];
  const re = (/** @type {string} */ s) => (/^re:/i.test(s) ? s : `Re: ${s}`);
  const thread = {
    ...(m.messageIdHeader ? { inReplyTo: m.messageIdHeader } : {}),
    references: refs,
    answering: m.id,
    attachments: [],
  };
  const reply = () =>
    onCompose({
      to: whoList(m.replyTo.length ? m.replyTo : m.from),
      cc: '',
      subject: re(m.subject),
      text: quote(),
      ...thread,
    });
  const replyAll = () =>
    onCompose({
      to: whoList(m.replyTo.length ? m.replyTo : m.from),
      cc: [...m.to, ...m.cc].map((a) => a.address).join(', '),
      subject: re(m.subject),
      text: quote(),
      ...thread,
    });
  const forward = () =>
    onCompose({
      to: '',
      cc: '',
      subject: /^fwd?:/i.test(m.subject) ? m.subject : `Fwd: ${m.subject}`,
      text:
        '\n\n---------- Forwarded message ----------\n' +
        `From: ${whoList(m.from)}\nDate: ${when(m.date)}\nSubject: ${m.subject}\nTo: ${whoList(m.to)}\n\n${m.text}`,
      attachments: [],
    });
  const frameSrc = `/webmail/v1/messages/${m.id}/html${images ? '?images=1' : ''}`;
  return html`<article class="reader" aria-labelledby="subject">
    <div class="toolbar" role="toolbar" aria-label="Message actions">
      <button type="button" onClick=${onBack}>Back</button>
      <button type="button" onClick=${reply}>Reply</button>
      <button type="button" onClick=${replyAll}>Reply all</button>
      <button type="button" onClick=${forward}>Forward</button>
      <button type="button" onClick=${toggleSeen}>${seen ? 'Mark unread' : 'Mark read'}</button>
      <button type="button" onClick=${toggleFlag} aria-pressed=${flagged}>${flagged ? 'Unflag' : 'Flag'}</button>
      <label for="move-to" class="visually-hidden">Move to folder</label>
      <select id="move-to" onChange=${move}>
        <option value="">Move to…</option>
        ${folders.filter((f) => f.id !== m.folderId).map((f) => html`<option value=${f.id}>${folderLabel(f)}</option>`)}
      </select>
      <button type="button" onClick=${remove}>Delete</button>
    </div>
    ${error && html`<p role="alert" class="error">${error}</p>`}
    <h2 id="subject">${m.subject || '(no subject)'}</h2>
    <dl class="headers">
      <dt>From</dt>
      <dd>${whoList(m.from)}</dd>
      <dt>To</dt>
      <dd>${whoList(m.to)}</dd>
      ${
        m.cc.length
          ? html`<dt>Cc</dt>
              <dd>${whoList(m.cc)}</dd>`
          : ''
      }
      <dt>Date</dt>
      <dd><time datetime=${m.date}>${when(m.date)}</time></dd>
    </dl>
    ${
      m.hasHtml
        ? html`<div class="view-switch">
            <button type="button" aria-pressed=${showHtml} onClick=${() => setShowHtml(!showHtml)}>
              ${showHtml ? 'Show plain text' : 'Show formatted'}
            </button>
            ${
              showHtml && m.remoteImages && !images
                ? html`<span class="notice">Remote images are blocked.</span>
                    <button type="button" onClick=${() => setImages(true)}>Load remote images</button>`
                : ''
            }
          </div>`
        : ''
    }
    ${
      showHtml
        ? html`<iframe
            class="body-frame"
            title="Message content"
            sandbox="allow-popups allow-popups-to-escape-sandbox"
            referrerpolicy="no-referrer"
            src=${frameSrc}
          ></iframe>`
        : html`<pre class="body-text">${m.text}</pre>`
    }
    ${
      m.attachments.length
        ? html`<section aria-label="Attachments" class="attachments">
            <h3>Attachments</h3>
            <ul>
              ${m.attachments.map(
                (a) =>
                  html`<li>
                    <a href=${`/webmail/v1/messages/${m.id}/parts/${a.part}`} download=${a.filename}>${a.filename}</a>
                    <span> (${a.contentType}, ${Math.ceil(a.size / 1024)} kB)</span>
                  </li>`,
              )}
            </ul>
          </section>`
        : ''
    }
  </article>`;
}

/** @param {{ session: Session, initial: Draft, onClose: (sent: boolean) => void }} props */
function Compose({ session, initial, onClose }) {
  const [d, setD] = useState(initial);
  const [status, setStatus] = useState('');
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const dirty = useRef(false);
  const draftId = useRef(initial.draftId);
  /** @param {keyof Draft} k @returns {(e: Event) => void} */
  const field = (k) => (e) => {
    dirty.current = true;
    setD({ ...d, [k]: /** @type {HTMLInputElement} */ (e.currentTarget).value });
  };
  const payload = () => ({
    to: splitAddresses(d.to),
    cc: splitAddresses(d.cc),
    subject: d.subject,
    text: d.text,
    attachments: d.attachments,
    ...(d.inReplyTo ? { inReplyTo: d.inReplyTo } : {}),
    ...(d.references?.length ? { references: d.references } : {}),
    ...(d.answering ? { answering: d.answering } : {}),
    ...(draftId.current ? { draftId: draftId.current } : {}),
  });
  const save = useCallback(async () => {
    dirty.current = false;
    const out = await api('POST', '/drafts', payload());
    draftId.current = out.draftId;
    setStatus(`Draft saved at ${new Date().toLocaleTimeString()}.`);
  }, [d]);
  // Kept in Drafts while written: saved a few seconds after the last change.
  useEffect(() => {
    if (!dirty.current) return;
    const t = setTimeout(() => save().catch(() => setStatus('The draft could not be saved.')), 3000);
    return () => clearTimeout(t);
  }, [d]);
  /** @param {Event} e */
  const attach = async (e) => {
    const input = /** @type {HTMLInputElement} */ (e.currentTarget);
    const files = [...(input.files ?? [])];
    const read = await Promise.all(files.map(readAttachment));
    dirty.current = true;
    setD({ ...d, attachments: [...d.attachments, ...read] });
    input.value = '';
  };
  /** @param {SubmitEvent} e */
  const send = async (e) => {
    e.preventDefault();
    setBusy(true);
    setError('');
    try {
      await api('POST', '/send', payload());
      onClose(true);
    } catch (err) {
      setError(err instanceof ApiError ? err.message : String(err));
    } finally {
      setBusy(false);
    }
  };
  const discard = async () => {
    onClose(false);
  };
  return html`<section class="compose" aria-labelledby="compose-title">
    <h2 id="compose-title">New message</h2>
    ${!session.canSend && html`<p role="alert" class="error cannot-send">${session.cannotSendReason}</p>`}
    <form onSubmit=${send}>
      <label for="c-to">To</label>
      <input id="c-to" name="to" value=${d.to} onInput=${field('to')} autocomplete="off" />
      <label for="c-cc">Cc</label>
      <input id="c-cc" name="cc" value=${d.cc} onInput=${field('cc')} autocomplete="off" />
      <label for="c-subject">Subject</label>
      <input id="c-subject" name="subject" value=${d.subject} onInput=${field('subject')} />
      <label for="c-text">Message</label>
      <textarea id="c-text" name="text" rows="14" value=${d.text} onInput=${field('text')}></textarea>
      <label for="c-files">Attach files</label>
      <input id="c-files" type="file" multiple onChange=${attach} />
      ${
        d.attachments.length
          ? html`<ul class="attached" aria-label="Attached files">
              ${d.attachments.map(
                (a, i) =>
                  html`<li>
                    ${a.filename}
                    <button
                      type="button"
                      class="small"
                      aria-label=${`Remove ${a.filename}`}
                      onClick=${() => setD({ ...d, attachments: d.attachments.filter((_, j) => j !== i) })}
                    >
                      Remove
                    </button>
                  </li>`,
              )}
            </ul>`
          : ''
      }
      ${error && html`<p role="alert" class="error">${error}</p>`}
      <p class="status" aria-live="polite">${status}</p>
      <div class="toolbar">
        <button type="submit" disabled=${busy || !session.canSend}>Send</button>
        <button type="button" onClick=${() => save().catch((err) => setError(String(err)))}>Save draft</button>
        <button type="button" onClick=${discard}>Close</button>
      </div>
    </form>
  </section>`;
}

/** @param {{ onDone: () => void }} props */
function PasswordForm({ onDone }) {
  const [msg, setMsg] = useState('');
  const [error, setError] = useState('');
  /** @param {SubmitEvent} e */
  const submit = async (e) => {
    e.preventDefault();
    const data = new FormData(/** @type {HTMLFormElement} */ (e.currentTarget));
    if (data.get('newPassword') !== data.get('repeat')) return setError('The new passwords differ.');
    try {
      const out = await api('POST', '/password', {
        currentPassword: String(data.get('currentPassword')),
        newPassword: String(data.get('newPassword')),
      });
      setCsrf(out.csrfToken);
      setError('');
      setMsg('Password changed. Other sessions were signed out.');
    } catch (err) {
      setError(err instanceof ApiError ? err.message : String(err));
    }
  };
  return html`<section class="settings" aria-labelledby="pw-title">
    <h2 id="pw-title">Change password</h2>
    <form onSubmit=${submit}>
      <label for="pw-current">Current password</label>
      <input id="pw-current" name="currentPassword" type="password" autocomplete="current-password" required />
      <label for="pw-new">New password (at least 10 characters)</label>
      <input id="pw-new" name="newPassword" type="password" autocomplete="new-password" minlength="10" required />
      <label for="pw-repeat">Repeat the new password</label>
      <input id="pw-repeat" name="repeat" type="password" autocomplete="new-password" minlength="10" required />
      ${error && html`<p role="alert" class="error">${error}</p>`} ${msg && html`<p role="status">${msg}</p>`}
      <div class="toolbar">
        <button type="submit">Change password</button>
        <button type="button" onClick=${onDone}>Back</button>
      </div>
    </form>
  </section>`;
}

/** @param {{ session: Session, onSignedOut: () => void }} props */
function Mail({ session, onSignedOut }) {
  const [folders, setFolders] = useState(/** @type {Folder[]} */ ([]));
  const [folderId, setFolderId] = useState(/** @type {string | null} */ (null));
  const [items, setItems] = useState(/** @type {Item[]} */ ([]));
  const [total, setTotal] = useState(0);
  const [page, setPage] = useState(1);
  const [query, setQuery] = useState('');
  const [message, setMessage] = useState(/** @type {Message | null} */ (null));
  const [draft, setDraft] = useState(/** @type {Draft | null} */ (null));
  const [settings, setSettings] = useState(false);
  const [error, setError] = useState('');
  const state = useRef({ folderId, page, query });
  state.current = { folderId, page, query };
  // Loads overlap (a folder picked while a refresh is in flight) and their answers can come back in any order:
  // only the newest load of each kind is applied, so an older folder's list never replaces the one picked.
  const loads = useRef({ folders: 0, list: 0 });

  const loadFolders = useCallback(async () => {
    const mine = ++loads.current.folders;
    const out = await api('GET', '/folders');
    if (mine !== loads.current.folders) return;
    setFolders(out.folders);
    if (!state.current.folderId && out.folders[0]) setFolderId(out.folders[0].id);
  }, []);
  const loadList = useCallback(async () => {
    const { folderId: f, page: p, query: q } = state.current;
    if (!f) return;
    const mine = ++loads.current.list;
    const qs = new URLSearchParams({ page: String(p), pageSize: String(PAGE_SIZE), ...(q ? { q } : {}) });
    const out = await api('GET', `/folders/${f}/messages?${qs}`);
    if (mine !== loads.current.list) return;
    setItems(out.messages);
    setTotal(out.total);
  }, []);
  /** @param {unknown} err */
  const failed = (err) => {
    if (err instanceof ApiError && err.status === 401) onSignedOut();
    else setError(err instanceof ApiError ? err.message : String(err));
  };
  const refresh = useCallback(() => {
    loadFolders().catch(failed);
    loadList().catch(failed);
  }, []);

  useEffect(() => {
    loadFolders().catch(failed);
  }, []);
  useEffect(() => {
    loadList().catch(failed);
  }, [folderId, page, query]);

  // New mail without a reload: the server's event stream says which folder changed.
  useEffect(() => {
    const es = new EventSource('/webmail/v1/events');
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    let timer;
    es.addEventListener('ready', () => document.body.setAttribute('data-live', 'on'));
    es.addEventListener('change', () => {
      clearTimeout(timer);
      timer = setTimeout(refresh, 200);
    });
    es.addEventListener('signout', () => {
      es.close();
      onSignedOut();
    });
    es.onerror = () => document.body.setAttribute('data-live', 'reconnecting');
    return () => {
      clearTimeout(timer);
      es.close();
    };
  }, []);

  /** @param {string} id */
  const open = async (id) => {
    try {
      const folder = folders.find((f) => f.id === folderId);
      if (folder?.role === 'drafts') {
        const m = /** @type {Message} */ (await api('GET', `/messages/${id}?markSeen=false`));
        setDraft({
          to: m.to.map((a) => a.address).join(', '),
          cc: m.cc.map((a) => a.address).join(', '),
          subject: m.subject,
          text: m.text,
          // Read back, so that saving or sending the draft again keeps its attachments.
          attachments: await Promise.all(m.attachments.map((a) => readStoredAttachment(m.id, a))),
          draftId: m.id,
        });
        return;
      }
      setMessage(await api('GET', `/messages/${id}`));
      refresh();
    } catch (err) {
      failed(err);
    }
  };
  const signOut = async () => {
    await api('DELETE', '/session').catch(() => {});
    onSignedOut();
  };
  const current = folders.find((f) => f.id === folderId) ?? null;
  const empty = (/** @type {Folder} */ f) => api('POST', `/folders/${f.id}/empty`).then(refresh).catch(failed);

  let main;
  if (settings) main = html`<${PasswordForm} onDone=${() => setSettings(false)} />`;
  else if (draft)
    main = html`<${Compose}
      session=${session}
      initial=${draft}
      onClose=${(/** @type {boolean} */ sent) => {
        setDraft(null);
        if (sent) setError('');
        refresh();
      }}
    />`;
  else if (message)
    main = html`<${Reader}
      message=${message}
      folders=${folders}
      onBack=${() => setMessage(null)}
      onChanged=${refresh}
      onCompose=${setDraft}
      onGone=${() => {
        setMessage(null);
        refresh();
      }}
    />`;
  else
    main = html`<${MessageList}
      folder=${current}
      items=${items}
      total=${total}
      page=${page}
      query=${query}
      onQuery=${(/** @type {string} */ q) => {
        setQuery(q);
        setPage(1);
      }}
      onPage=${setPage}
      onOpen=${open}
    />`;

  return html`<div class="mail">
    <header class="topbar">
      <h1 class="visually-hidden">Webmail</h1>
      <span class="me">${session.address}</span>
      <button
        type="button"
        class="primary"
        onClick=${() => setDraft({ to: '', cc: '', subject: '', text: '', attachments: [] })}
      >
        Compose
      </button>
      <button type="button" onClick=${() => setSettings(true)}>Password</button>
      <button type="button" onClick=${signOut}>Sign out</button>
    </header>
    <${FolderList}
      folders=${folders}
      current=${folderId}
      onPick=${(/** @type {string} */ id) => {
        setFolderId(id);
        setPage(1);
        setQuery('');
        setMessage(null);
        setDraft(null);
        setSettings(false);
      }}
      onEmpty=${empty}
    />
    <main class="content">${error && html`<p role="alert" class="error">${error}</p>`} ${main}</main>
  </div>`;
}

function App() {
  const [session, setSession] = useState(/** @type {Session | null | undefined} */ (undefined));
  useEffect(() => {
    api('GET', '/session')
      .then((s) => {
        setCsrf(s.csrfToken);
        setSession(s);
      })
      .catch(() => setSession(null));
  }, []);
  if (session === undefined) return html`<p class="loading">Loading…</p>`;
  if (session === null) return html`<${SignIn} onSignedIn=${setSession} />`;
  return html`<${Mail} session=${session} onSignedOut=${() => setSession(null)} />`;
}

const root = document.getElementById('webmail-app');
if (root) {
  root.textContent = '';
  render(html`<${App} />`, root);
}

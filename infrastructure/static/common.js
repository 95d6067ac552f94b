// What the seat page and the host page share: the game's words, building elements, a
// choice that asks once, calling the server with a bearer token, sending a command again
// when its answer was lost, and the error banner. Loaded before either page's own script,
// it defines `window.duneLedger`.
window.duneLedger = (() => {
  'use strict';

  const $ = (id) => document.getElementById(id);

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k === 'text') el.textContent = v;
      else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? '' : v);
    }
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }

  // The game's words (domain/words.py), which the server writes into the page's
  // data-words: every name a player reads comes from there.
  const holder = document.querySelector('[data-words]');
  const words = JSON.parse((holder && holder.dataset.words) || '{}');
  const named = (table, id) => (words[table] || {})[id] || String(id).replaceAll('_', ' ');
  const fname = (f) => named('factions', f);
  const plural = (n, one, many = one + 's') => `${n} ${n === 1 ? one : many}`;

  // What cannot be taken back (a card spent, a token replaced, a room ended) asks once:
  // it says what will happen, then offers `yes` and `no`, both buttons the caller made.
  function confirmation(question, says, yes, no) {
    return h('div', { class: 'confirm', role: 'group', 'aria-label': question },
      h('p', { class: 'says', text: says }), h('div', { class: 'row wrap' }, yes, no));
  }

  // A request that did not succeed. `status` is 0 when the server did not answer; `code`
  // is the server's error code when it gave one ('unreachable' when it did not answer).
  class Failure extends Error {
    constructor(message, status, code = null) {
      super(message);
      this.status = status;
      this.code = code;
      this.again = status === 0 || status === 503; // the same request may be sent again
    }
  }

  // One request, with the token (when there is one) in the Authorization header.
  async function reach(path, token, options = {}) {
    const headers = { ...(options.headers || {}) };
    if (token) headers.Authorization = 'Bearer ' + token;
    try {
      return await fetch(path, { ...options, cache: 'no-store', headers });
    } catch (e) {
      throw new Failure('The server does not answer.', 0, 'unreachable');
    }
  }

  // The JSON body of a successful answer (null when there is none); any other answer is
  // thrown as a Failure, in the server's words when it gave them.
  async function read(response) {
    const body = await response.json().catch(() => null);
    if (response.ok) return body;
    const error = body && body.error;
    throw new Failure(error ? `${error.message} (${error.code})`
      : `The server answered HTTP ${response.status}.`, response.status, error ? error.code : null);
  }

  async function call(path, token, options = {}) {
    return read(await reach(path, token, options));
  }

  // One press is one command_id. A press whose answer was lost, or answered 503, is sent
  // again with that id: the server answers a repeated id with its first result, so a
  // command that did land is not applied twice. `stopped` says the page gave up meanwhile.
  async function persist(send, stopped = () => false) {
    for (let attempt = 0; ; attempt += 1) {
      try {
        return await send();
      } catch (e) {
        if (!e.again || attempt >= 4 || stopped()) throw e;
        await new Promise((done) => setTimeout(done, 300 * 2 ** attempt));
      }
    }
  }

  // A file read with the token in a header (never in an address), offered to the browser.
  async function download(path, token, file) {
    const response = await reach(path, token);
    if (!response.ok) await read(response); // throws the server's refusal
    const url = URL.createObjectURL(await response.blob());
    const link = h('a', { href: url, download: file, hidden: true });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
  }

  function showError(message) {
    $('error').textContent = message;
    $('error').hidden = false;
  }

  function clearError() {
    $('error').hidden = true;
    $('error').textContent = '';
  }

  return { $, h, named, fname, plural, confirmation, reach, read, call, persist, download,
    showError, clearError };
})();

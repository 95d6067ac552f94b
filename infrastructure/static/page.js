// The seat page: draws one seat's view and sends the commands its `actions` list.
// It decides no rule: a control exists only because the server listed the command,
// and whatever the server answers is shown as it is. Text is set with textContent,
// never parsed as HTML (a Truthtrance question is a player's own words).
(() => {
  'use strict';

  const root = document.getElementById('table');
  const room = root.dataset.room;
  const KEY = 'dune-ledger:token:' + room;
  const base = '/rooms/' + encodeURIComponent(room);
  const PROFILES = ['easy', 'medium', 'hard', 'brutal'];
  const BLOCKED = {
    locked: 'a search is already open',
    insufficient_spice: 'not enough spice for the fee',
    no_eligible_card: 'the discard holds no card the Box may take',
    hand_over_limit: 'your hand is over its limit',
    card_committed: 'the Box is committed elsewhere',
    truthtrance_pending: 'a Truthtrance question must be answered first',
    not_in_hand: 'the Box is not in your hand',
    not_your_decision: 'another decision comes first',
  };

  let token = null;
  let view = null;
  let lastSeq = 0;
  let source = null;
  let polling = null;
  let retry = 0;
  let failedStreams = 0;
  let clockOffset = 0; // server clock minus this browser's, from the Date header
  let countdown = null;
  let stopped = false;

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

  // --- talking to the server -------------------------------------------------

  class Failure extends Error {
    constructor(message, { fatal = false, code = null } = {}) {
      super(message);
      this.fatal = fatal;
      this.code = code;
    }
  }

  async function call(path, options = {}) {
    let response;
    try {
      response = await fetch(path, {
        ...options,
        cache: 'no-store',
        headers: { Authorization: 'Bearer ' + token, ...(options.headers || {}) },
      });
    } catch (e) {
      throw new Failure('The server does not answer.');
    }
    const date = Date.parse(response.headers.get('Date') || '');
    if (!Number.isNaN(date)) clockOffset = date - Date.now();
    let body = null;
    try {
      body = await response.json();
    } catch (e) {
      body = null;
    }
    if (!response.ok && !(body && body.ok === false)) {
      throw new Failure('The server answered HTTP ' + response.status + '.');
    }
    if (body && body.ok === false && body.error) {
      const fatal = response.status === 401 || response.status === 404;
      throw new Failure(body.error.message + ' (' + body.error.code + ')',
        { fatal, code: body.error.code });
    }
    return body;
  }

  function newCommandId() {
    if (window.crypto && crypto.randomUUID) return 'page-' + crypto.randomUUID();
    const bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes);
    return 'page-' + Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
  }

  // A disabled button drops the focus: the redraw gives it back to the control with
  // the same key, when there still is one.
  let refocus = null;

  async function send(command, button) {
    clearError();
    if (button) {
      refocus = button.dataset.key || null;
      button.disabled = true;
    }
    try {
      const result = await call(base + '/commands', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ ...command, command_id: newCommandId() }),
      });
      if (view === null || result.version > view.version) await refresh();
    } catch (e) {
      showError(e.message);
      if (button) button.disabled = false;
    }
  }

  async function refresh() {
    apply(await call(base + '/view'));
  }

  async function loadLog() {
    const entries = await call(base + '/log?after=' + lastSeq);
    const list = $('log-body');
    for (const entry of entries) {
      if (entry.seq <= lastSeq) continue;
      lastSeq = entry.seq;
      list.append(h('li', { 'data-seq': entry.seq, value: entry.seq },
        h('span', { class: 'seq', text: 'v' + entry.version }), ' ', entry.text));
    }
    while (list.children.length > 300) list.firstElementChild.remove();
    list.scrollTop = list.scrollHeight;
  }

  // The stream carries the seat's view each time it changes. After a restart the
  // browser (or we) reconnect; the first event is the current view, so an open search
  // shows again as open. A page on a server without the stream reads the view instead.
  function connect() {
    if (stopped) return;
    if (source) source.close();
    let delivered = false;
    const es = new EventSource(base + '/stream?token=' + encodeURIComponent(token));
    source = es;
    es.addEventListener('view', (event) => {
      delivered = true;
      retry = 0;
      failedStreams = 0;
      setStatus('Live');
      apply(JSON.parse(event.data));
    });
    // A reconnect resumes from Last-Event-ID, and the server sends nothing until the view
    // changes: so an open connection is news enough, and one read makes sure of the view.
    es.onopen = () => {
      retry = 0;
      setStatus('Live');
      refresh().catch((e) => (e.fatal ? stop(e.message) : null));
    };
    es.onerror = () => {
      if (es.readyState === EventSource.CLOSED) {
        es.close();
        if (!delivered) failedStreams += 1;
        reconnectLater();
      } else {
        setStatus('Reconnecting…');
      }
    };
  }

  function reconnectLater() {
    setStatus('Reconnecting…');
    const wait = Math.min(5000, 500 * 2 ** retry);
    retry += 1;
    setTimeout(resync, wait);
  }

  async function resync() {
    if (stopped) return;
    try {
      await refresh();
    } catch (e) {
      if (e.fatal) return stop(e.message);
      return reconnectLater();
    }
    retry = 0;
    if (failedStreams >= 2) startPolling();
    else connect();
  }

  function startPolling() {
    if (polling) return;
    setStatus('Live (reading every 2 s)');
    polling = setInterval(async () => {
      try {
        await refresh();
        setStatus('Live (reading every 2 s)');
      } catch (e) {
        if (e.fatal) stop(e.message);
        else setStatus('Reconnecting…');
      }
    }, 2000);
  }

  function stop(message) {
    stopped = true;
    if (source) source.close();
    if (polling) clearInterval(polling);
    sessionStorage.removeItem(KEY);
    token = null;
    view = null;
    shown = '';
    lastSeq = 0;
    $('log-body').replaceChildren();
    showError(message);
    showTokenForm();
  }

  // --- state on screen -------------------------------------------------------

  function setStatus(text) {
    $('status').textContent = text;
  }

  function showError(message) {
    const el = $('error');
    el.textContent = message;
    el.hidden = false;
  }

  function clearError() {
    $('error').hidden = true;
    $('error').textContent = '';
  }

  let shown = '';

  function apply(next) {
    if (!next || (view && next.version < view.version)) return;
    const text = JSON.stringify(next);
    if (text === shown) return; // the same view again (a poll, a reconnect): keep the screen
    shown = text;
    const changed = !view || next.version !== view.version;
    view = next;
    render();
    if (changed) loadLog().catch((e) => showError(e.message));
  }

  const actions = (type) => (view.actions || []).filter((a) => a.type === type);
  const cardName = (id) => {
    const all = [...view.me.hand, ...(view.nullentropy && view.nullentropy.search
      && view.nullentropy.search.cards || []), ...(view.semuta && view.semuta.cards || [])];
    const found = all.find((c) => c.id === id);
    return found ? found.name : id;
  };
  const keyOf = (action) => JSON.stringify(action);

  function actionButton(action, label, cls) {
    return h('button', {
      type: 'button', class: cls || null, 'data-key': keyOf(action),
      onclick: (e) => send(action, e.currentTarget),
    }, label);
  }

  function fill(id, ...children) {
    const body = $(id + '-body');
    body.replaceChildren(...children.flat(Infinity).filter(Boolean));
    $(id).hidden = body.childElementCount === 0;
  }

  function cardItem(card) {
    return h('li', { class: 'card cat-' + card.category, 'data-card': card.id },
      h('span', { class: 'name', text: card.name }),
      h('span', { class: 'cat', text: card.category }));
  }

  function render() {
    // Keep the keyboard where it was: the control with the same key gets focus back.
    const active = document.activeElement;
    const focused = (active && active !== document.body && active.dataset
      ? active.dataset.key : null) || refocus;
    // ...and what a player was typing stays typed.
    const typed = new Map(Array.from(document.querySelectorAll('input[data-key], select[data-key]'))
      .map((el) => [el.dataset.key, el.value]));
    const used = new Set();
    const take = (type) => {
      used.add(type);
      return actions(type);
    };

    $('where').textContent = `${view.seat} · ${view.mode} · turn ${view.turn}, phase ${view.phase}`
      + ` · version ${view.version}`;
    renderMe();
    renderOthers();
    renderPiles();
    renderBox(take('begin_search'), take('select_card'));
    renderDecision(take('ambassador_decide'), take('ambassador_copy'));
    renderResponse(take('respond'));
    renderGift(take('answer_gift'));
    renderTruthtrance(take('answer_truthtrance'));
    renderSemuta(take('semuta'));
    renderAmbassador();
    renderAutopilot(take('set_autopilot'));
    renderMore((view.actions || []).filter((a) => !used.has(a.type)));

    for (const el of document.querySelectorAll('input[data-key], select[data-key]')) {
      if (typed.has(el.dataset.key)) el.value = typed.get(el.dataset.key);
    }
    if (focused) {
      const again = Array.from(document.querySelectorAll('[data-key]'))
        .find((el) => el.dataset.key === focused);
      if (again) {
        again.focus();
        refocus = null;
      }
    }
  }

  function renderMe() {
    const me = view.me;
    const receipts = (view.receipts || []).map((r) => h('li', {},
      `${r.amount} spice for ${cardName(r.card)}`
      + (r.bonus ? `, and ${cardName(r.bonus)} as a bonus` : '') + ` (${r.stage})`));
    fill('me',
      h('dl', { class: 'facts' },
        h('dt', { text: 'Faction' }), h('dd', { text: me.faction }),
        h('dt', { text: 'Spice' }), h('dd', { id: 'my-spice', text: String(me.spice) }),
        h('dt', { text: 'Reserved' }), h('dd', { id: 'my-reserved', text: String(me.reserved) }),
        h('dt', { text: 'Hand' }),
        h('dd', { text: `${me.hand.length} of ${me.hand_limit}` }),
        me.ally ? [h('dt', { text: 'Ally' }), h('dd', { text: me.ally })] : null),
      h('h3', { text: 'My hand' }),
      me.hand.length ? h('ul', { class: 'hand', id: 'my-hand' }, me.hand.map(cardItem))
        : h('p', { class: 'hint', text: 'No cards.' }),
      receipts.length ? [h('h3', { text: 'My purchases' }), h('ul', {}, receipts)] : null);
  }

  function renderOthers() {
    fill('others', h('table', {},
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col', text: 'Seat' }), h('th', { scope: 'col', text: 'Cards' }),
        h('th', { scope: 'col', text: 'Ally' }), h('th', { scope: 'col', text: 'Autopilot' }))),
      h('tbody', {}, view.seats.map((s) => h('tr', { 'data-seat': s.faction },
        h('th', { scope: 'row', text: s.faction }), h('td', { text: String(s.hand_count) }),
        h('td', { text: s.ally || '—' }), h('td', { text: s.autopilot || 'off' }))))));
  }

  function renderPiles() {
    const top = view.discard.top;
    fill('piles', h('dl', { class: 'facts' },
      h('dt', { text: 'Deck' }), h('dd', { text: `${view.deck.count} cards` }),
      h('dt', { text: 'Discard' }), h('dd', { text: `${view.discard.count} cards` }),
      h('dt', { text: 'Discard top' }),
      h('dd', { id: 'discard-top', text: top ? `${top.name} (${top.category})` : 'empty' })));
  }

  function renderBox(begin, select) {
    const box = view.nullentropy;
    const parts = [];
    if (view.search && (!box || !box.search)) {
      parts.push(h('p', { class: 'notice', id: 'search-open' },
        `${view.search.owner} paid for a Box search and is choosing a card.`));
    }
    if (box) {
      const search = box.search;
      const notice = box.full_hand_exchange
        ? h('p', { class: 'warning', id: 'full-hand-notice', role: 'note' },
          h('strong', { text: 'Provisional: ' }), box.notice
            || 'your hand is at its limit; the Box leaves as the card you take arrives.')
        : null;
      if (!search) {
        parts.push(h('p', {}, `You hold the ${box.card.name}. `
          + 'Its fee buys a secret search of the discard for one card other than a Box.'));
        parts.push(notice);
        if (begin.length) {
          parts.push(...begin.map((a) => actionButton(a, 'Pay 2 spice and search the discard',
            'primary')));
        } else {
          const reason = box.blocked ? (BLOCKED[box.blocked] || box.blocked) : 'not now';
          parts.push(h('button', { type: 'button', disabled: true, 'aria-describedby': 'box-blocked' },
            'Pay 2 spice and search the discard'));
          parts.push(h('p', { class: 'blocked', id: 'box-blocked' },
            `Not available: ${reason}` + (box.blocked ? ` (${box.blocked})` : '') + '.'));
        }
      } else {
        parts.push(h('p', { class: 'notice', id: 'search-open' },
          'Search open: the fee is paid. Choose the card to take; the rest of the discard is '
          + 'shuffled and the Box goes on top.'));
        parts.push(notice);
        const cards = search.cards || [];
        const byId = new Map(select.map((a) => [a.card, a]));
        if (!cards.length) parts.push(h('p', { class: 'hint', text: 'No candidates to show.' }));
        parts.push(h('ul', { class: 'candidates', id: 'candidates', 'aria-label': 'Cards you may take' },
          cards.map((card) => {
            const action = byId.get(card.id);
            return h('li', { class: 'candidate cat-' + card.category, 'data-card': card.id },
              h('span', { class: 'name', text: card.name }),
              h('span', { class: 'cat', text: card.category }),
              action ? actionButton(action, `Take ${card.name}`) : null);
          })));
      }
    }
    fill('box', parts);
  }

  function renderDecision(decide, copy) {
    const d = view.decision;
    if (!d || d.kind === 'nullentropy') return fill('decision');
    const mine = d.player === view.seat;
    fill('decision',
      h('p', {}, mine ? `Your decision: ${d.kind}.` : `${d.player} is deciding (${d.kind}).`),
      d.token ? h('p', { text: `The ${d.token} ambassador in ${d.territory}, entered by ${d.entrant}.` })
        : null,
      h('div', { class: 'row wrap' },
        decide.map((a) => actionButton(a, a.trigger
          ? `Trigger it${a.beneficiary ? ' for ' + a.beneficiary : ''}` : 'Do not trigger it',
        a.trigger ? 'primary' : null)),
        copy.map((a) => actionButton(a, `Copy the ${a.token} ambassador`))));
  }

  function parseDeadline(deadline) {
    if (deadline === null || deadline === undefined) return null;
    if (typeof deadline === 'number') return deadline > 1e12 ? deadline : deadline * 1000;
    const at = Date.parse(deadline);
    return Number.isNaN(at) ? null : at;
  }

  function tick() {
    const el = $('deadline');
    if (!el) return;
    const left = Math.max(0, Math.round((Number(el.dataset.at) - (Date.now() + clockOffset)) / 1000));
    el.textContent = left > 0 ? `${left} s left to answer` : 'Time is up: the window closes';
  }

  function renderResponse(respond) {
    const w = view.response;
    if (countdown) clearInterval(countdown);
    countdown = null;
    if (!w) return fill('response');
    const at = parseDeadline(w.deadline);
    const waiting = w.waiting || [];
    fill('response',
      h('p', {}, h('strong', { text: w.kind.replaceAll('_', ' ') }),
        w.stage ? ` (${w.stage})` : '',
        w.payer ? ` · paid by ${w.payer}` + (w.amount !== undefined ? ` (${w.amount} spice)` : '')
          : '',
        w.beneficiary ? ` · for ${w.beneficiary}` : ''),
      at !== null ? h('p', { id: 'deadline', class: 'deadline', 'data-at': String(at) }) : null,
      h('p', { id: 'waiting' }, waiting.length ? `Waiting for: ${waiting.join(', ')}` : 'Nobody is waited for.'),
      (w.passes || []).length ? h('p', { text: `Passed: ${w.passes.join(', ')}` }) : null,
      respond.length ? h('div', { class: 'row' }, respond.map((a) => actionButton(a,
        a.action === 'karama' ? karamaLabel(a) : 'Pass',
        a.action === 'karama' ? 'primary' : null))) : null);
    if (at !== null) {
      tick();
      countdown = setInterval(tick, 1000);
    }
  }

  function karamaLabel(a) {
    const name = a.card ? cardName(a.card) : 'Karama';
    return name === 'Karama' ? 'Play Karama' : `Play ${name} as Karama`;
  }

  function renderGift(answer) {
    // An offer is either the view's `gift` or a response window of kind gift; its card
    // is there only for the giver and the ally.
    const w = view.response && view.response.kind === 'gift' ? view.response : null;
    const g = view.gift || w;
    if (!g && !answer.length) return fill('gift');
    const what = g && g.card ? g.card.name : 'a card';
    fill('gift',
      g ? h('p', {}, `${g.giver || 'Richese'} offers ${what} to ${g.to || 'an ally'}.`) : null,
      h('div', { class: 'row wrap' }, answer.map((a) => actionButton(a,
        a.accept ? `Accept ${what}` : 'Refuse the gift', a.accept ? 'primary' : null))));
  }

  function renderTruthtrance(answer) {
    const t = view.truthtrance;
    if (!t) return fill('truthtrance');
    const promised = (a) => (a.promise && a.promise.box ? ` and promise the fee of ${cardName(a.promise.box)}` : '');
    fill('truthtrance',
      h('p', {}, `${t.asker} asks ${t.target}:`), h('blockquote', { text: t.question }),
      answer.length ? h('div', { class: 'row wrap' }, answer.filter((a) => !a.free).map((a) =>
        actionButton(a, `Answer ${a.answer}${promised(a)}`, a.answer === 'yes' ? 'primary' : null)))
        : h('p', { class: 'hint', text: `Waiting for ${t.target}'s answer.` }),
      answer.filter((a) => a.free).map((a) => freeForm(a, `Answer ${a.answer} and promise spice`)));
  }

  // An action with `free` fields is sent with values the player writes, within the bounds
  // the server described; the server still checks them.
  function freeForm(action, title) {
    const { free, ...command } = action;
    const key = keyOf(action);
    const inputs = Object.entries(free).map(([name, spec]) => {
      const id = 'f' + Math.abs(hash(key + name));
      const data = { id, 'data-key': key + ':' + name, required: true };
      let input;
      let what = name.charAt(0).toUpperCase() + name.slice(1).replaceAll('_', ' ');
      if (spec.kind === 'choice') {
        input = h('select', data, (spec.options || []).map((o) => h('option', { value: JSON.stringify(o),
          text: String(o) })));
      } else if (spec.kind === 'spice_promise' || spec.kind === 'number' || spec.kind === 'spice') {
        input = h('input', { ...data, type: 'number', min: spec.min, max: spec.max, step: '1',
          inputmode: 'numeric' });
        if (spec.kind === 'spice_promise') what = 'Spice promised';
        if (spec.min !== undefined && spec.max !== undefined) what += ` (${spec.min} to ${spec.max})`;
      } else {
        input = h('input', { ...data, type: 'text', minlength: spec.min_length,
          maxlength: spec.max_length, autocomplete: 'off' });
        if (spec.of) what += ` (${spec.of})`;
      }
      return { name, spec, input, label: h('label', { for: id, text: what }) };
    });
    const form = h('form', { class: 'stack free' }, h('p', { class: 'title', text: title }),
      inputs.map((f) => [f.label, f.input]),
      h('button', { type: 'submit', 'data-key': key }, 'Send'));
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      const values = {};
      for (const f of inputs) {
        const raw = f.input.value.trim();
        if (f.spec.kind === 'choice') values[f.name] = JSON.parse(raw);
        else if (f.spec.kind === 'spice_promise') values[f.name] = { spice: Number(raw) };
        else if (f.input.type === 'number') values[f.name] = Number(raw);
        else values[f.name] = raw;
      }
      send({ ...command, ...values }, form.querySelector('button'));
    });
    return form;
  }

  function hash(text) {
    let n = 0;
    for (const ch of text) n = (n * 31 + ch.codePointAt(0)) | 0;
    return n;
  }

  function renderSemuta(semuta) {
    const s = view.semuta;
    if (!s && !semuta.length) return fill('semuta');
    fill('semuta',
      s && s.event ? h('p', { text: `${s.discarder} discarded: Semuta may react.` }) : null,
      s && s.queued ? h('p', { class: 'hint', text: `${s.queued} more discard(s) wait for Semuta.` })
        : null,
      h('div', { class: 'row wrap' }, semuta.map((a) => actionButton(a,
        a.action === 'take' ? `Take ${cardName(a.card)} (Semuta)` : 'Pass'))));
  }

  function renderAmbassador() {
    const amb = view.ambassador;
    if (!amb) return fill('ambassador');
    const placed = Object.entries(amb.placed || {});
    const entry = amb.entry;
    fill('ambassador',
      entry ? h('dl', { class: 'facts', id: 'ambassador-stage' },
        h('dt', { text: 'Token' }), h('dd', { text: `${entry.token} in ${entry.territory}` }),
        h('dt', { text: 'Entered by' }), h('dd', { text: `${entry.entrant} (${entry.via})` }),
        h('dt', { text: 'Stage' }), h('dd', { id: 'ambassador-stage-name', text: entry.stage }),
        entry.beneficiary ? [h('dt', { text: 'For' }), h('dd', { text: entry.beneficiary })] : null,
        entry.payer ? [h('dt', { text: 'Paid' }),
          h('dd', { text: `${entry.payer}: ${entry.amount} spice, ${entry.cards} card(s)` })] : null)
        : null,
      placed.length ? h('p', {}, 'Placed: ' + placed.map(([t, k]) => `${k} in ${t}`).join(', ')) : null,
      h('p', { class: 'hint' }, `Used: ${(amb.used || []).join(', ') || 'none'}`));
  }

  // Autopilot's profiles come from the listed actions: one per profile, or one whose
  // profile is a free choice.
  function renderAutopilot(set) {
    if (!set.length) return fill('autopilot');
    const current = view.me.autopilot;
    const choices = [];
    for (const a of set.filter((x) => x.enabled)) {
      const { free, ...command } = a;
      const options = free && free.profile ? free.profile.options || [] : [a.profile];
      for (const p of options) if (p !== current) choices.push({ ...command, profile: p });
    }
    const off = set.find((a) => a.enabled === false);
    const select = choices.length ? h('select', { id: 'autopilot-profile', 'data-key': 'autopilot-profile' },
      choices.map((a, i) => h('option', { value: String(i), text: a.profile }))) : null;
    fill('autopilot',
      h('p', { id: 'autopilot-now' },
        current ? `On, profile ${current}: the server plays this seat.` : 'Off: you play this seat.'),
      select ? h('label', { for: 'autopilot-profile', class: 'inline' }, 'Profile ', select) : null,
      h('div', { class: 'row wrap' },
        select ? h('button', { type: 'button', 'data-key': 'autopilot-on',
          onclick: (e) => send(choices[Number(select.value)], e.currentTarget) },
        current ? 'Switch to this profile' : 'Turn autopilot on') : null,
        off ? actionButton(off, 'Turn autopilot off') : null));
  }

  function label(a) {
    const card = a.card ? cardName(a.card) : null;
    switch (a.type) {
      case 'draw': return 'Draw a card';
      case 'discard': return `Discard ${card}`;
      case 'distrans': return `Distrans: give ${cardName(a.give)} to ${a.to}`;
      case 'offer_gift': return `Offer ${card} to ${a.to}`;
      case 'ask_truthtrance': return `Ask ${a.target} a Truthtrance question`;
      case 'enter_territory': return 'Enter a territory' + (a.via ? ` by ${a.via}` : '');
      case 'guild_stop': return 'Stop a shipping cost (Guild)';
      default: {
        const fields = Object.entries(a).filter(([k]) => k !== 'type' && k !== 'free')
          .map(([k, v]) => `${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`);
        const name = a.type.replaceAll('_', ' ');
        return fields.length ? `${name} (${fields.join(', ')})` : name;
      }
    }
  }

  function renderMore(rest) {
    const types = [...new Set(rest.map((a) => a.type))];
    fill('more', types.map((type) => {
      const group = rest.filter((a) => a.type === type);
      return h('div', { class: 'group' },
        h('div', { class: 'row wrap' }, group.filter((a) => !a.free).map((a) => actionButton(a, label(a)))),
        group.filter((a) => a.free).map((a) => freeForm(a, label(a))));
    }));
  }

  // --- the token -------------------------------------------------------------

  function showTokenForm() {
    $('seat').hidden = true;
    $('leave').hidden = true;
    $('token-form').hidden = false;
    setStatus('Not connected');
    $('token').focus();
  }

  function start() {
    stopped = false;
    retry = 0;
    failedStreams = 0;
    $('token-form').hidden = true;
    $('seat').hidden = false;
    $('leave').hidden = false;
    setStatus('Connecting…');
    resync();
  }

  // A link may carry the token in its fragment, which no browser sends to a server:
  // take it into session storage and drop it from the address bar and history entry.
  const fragment = new URLSearchParams(location.hash.slice(1));
  if (fragment.get('token')) {
    sessionStorage.setItem(KEY, fragment.get('token'));
    history.replaceState(null, '', location.pathname + location.search);
  }

  $('token-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const value = $('token').value.trim();
    if (!value) return;
    $('token').value = '';
    clearError();
    sessionStorage.setItem(KEY, value);
    token = value;
    start();
  });

  $('leave').addEventListener('click', () => {
    stop('You left this seat. Paste a token to sit again.');
    $('error').hidden = true;
  });

  token = sessionStorage.getItem(KEY);
  if (token) start();
  else showTokenForm();
})();

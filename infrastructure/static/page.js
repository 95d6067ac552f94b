// The seat page: draws one seat's view and sends the commands its `actions` list.
// It decides no rule: a control exists only because the server listed the command,
// and whatever the server answers is shown as it is. Text is set with textContent,
// never parsed as HTML (a Truthtrance question is a player's own words).
(() => {
  'use strict';

  const root = document.getElementById('table');
  const room = root.dataset.room;
  // 'play': one seat's view and its actions; 'watch': the public view, for spectators.
  const watching = root.dataset.mode === 'watch';
  const KEY = 'dune-ledger:' + (watching ? 'spectator:' : 'token:') + room;
  const base = '/rooms/' + encodeURIComponent(room);
  const {
    $, h, named, fname, plural, confirmation, reach, read, persist, download,
  } = window.duneLedger;
  const who = (f) => (view && f === view.seat ? 'you' : fname(f));
  const BLOCKED = {
    locked: 'a search is already open',
    insufficient_spice: 'not enough spice for the fee',
    no_eligible_card: 'the discard holds no card the Box may take',
    hand_over_limit: 'your hand is over its limit',
    card_committed: 'the Box is committed elsewhere',
    truthtrance_pending: 'a Truthtrance question must be answered first',
    not_in_hand: 'the Box is not in your hand',
    not_your_decision: 'another decision comes first',
    not_dealt: 'the cards are not dealt yet (see Fair dealing)',
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
  let unreachable = false; // the banner says the server does not answer
  const mine = []; // my log: what happened to me, one entry per change of my own view

  // --- talking to the server -------------------------------------------------

  async function call(path, options = {}) {
    const response = await reach(path, token, options);
    // An answer: a banner saying the server does not answer is stale now.
    if (unreachable) clearError();
    const date = Date.parse(response.headers.get('Date') || '');
    if (!Number.isNaN(date)) clockOffset = date - Date.now();
    return read(response);
  }

  // The token is refused or the room is unknown: asking again will not help.
  const fatal = (e) => e.code !== null && (e.status === 401 || e.status === 404);

  // A refused token, with what to do next. A token that worked until now was replaced:
  // the host gave the seat a new one.
  function refusal(e) {
    if (e.code !== 'unauthorized') return e.message;
    if (watching) {
      return `${e.message}. Ask the host for the spectators' invitation, then open it or `
        + 'paste its token below.';
    }
    if (view) {
      return 'This seat\'s token no longer works: the host gave the seat a new one. Ask the '
        + 'host for your invitation, then open it or paste its token below.';
    }
    return `${e.message}. Ask the host for your invitation, then open it or paste its token `
      + 'below.';
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

  // After a command, the focus goes to the next thing to do (nextFocus), unless the
  // control pressed is still there (a profile switch).
  let nextFocus = false;

  async function send(command, button) {
    clearError();
    if (button) {
      refocus = button.dataset.key || null;
      button.disabled = true;
    }
    try {
      const body = await signed({ ...command, command_id: newCommandId() });
      const result = await deliver(base + '/commands', JSON.stringify(body));
      if (body.sig) await fair.accepted(held, body.command_id).catch(() => {});
      if (button) nextFocus = true;
      confirming = null;
      if (view === null || result.version > view.version) await refresh();
      else render();
      return true;
    } catch (e) {
      showError(e.message, e.code);
      if (button) button.disabled = false;
      return false;
    }
  }

  function deliver(path, body) {
    return persist(() => call(path, { method: 'POST', headers: { 'Content-Type': 'application/json' },
      body }), () => stopped);
  }

  async function refresh() {
    apply(await call(base + (watching ? '/public' : '/view')));
  }

  // The public log: one item per command (the entries of one append, which share its
  // `append`), its lines in the order they happened, each with its number written out.
  async function loadLog() {
    const entries = await call(base + '/log?after=' + lastSeq);
    const list = $('log-body');
    for (const entry of entries) {
      if (entry.seq <= lastSeq) continue;
      lastSeq = entry.seq;
      const append = String(entry.append ?? entry.version);
      let lines = list.lastElementChild;
      if (!lines || lines.dataset.append !== append) {
        lines = h('li', { class: 'move', 'data-append': append });
        list.append(lines);
      }
      lines.append(h('p', { class: 'line', 'data-seq': entry.seq },
        h('span', { class: 'seq', text: String(entry.seq) }), h('span', { text: entry.text })));
    }
    while (list.children.length > 200) list.firstElementChild.remove();
    list.scrollTop = list.scrollHeight;
  }

  // The stream carries the seat's view each time it changes. After a restart the
  // browser (or we) reconnect; the first event is the current view, so an open search
  // shows again as open. A page on a server without the stream reads the view instead.
  function connect() {
    if (stopped) return;
    if (source) source.close();
    let delivered = false;
    const es = new EventSource(base + '/stream?presence=1&token=' + encodeURIComponent(token));
    presence = null;
    source = es;
    es.addEventListener('view', (event) => {
      delivered = true;
      retry = 0;
      failedStreams = 0;
      setStatus('Live');
      if (unreachable) clearError();
      apply(JSON.parse(event.data));
    });
    // Who has each seat open now (public): the server counts the open streams.
    es.addEventListener('presence', (event) => {
      presence = JSON.parse(event.data);
      if (view) renderOthers();
    });
    // A reconnect resumes from Last-Event-ID, and the server sends nothing until the view
    // changes: so an open connection is news enough, and one read makes sure of the view.
    es.onopen = () => {
      retry = 0;
      setStatus('Live');
      if (unreachable) clearError();
      refresh().catch((e) => (fatal(e) ? stop(refusal(e)) : null));
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
      if (fatal(e)) return stop(refusal(e));
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
        if (fatal(e)) stop(refusal(e));
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
    seeding = false;
    forget();
    lastSeq = 0;
    mine.length = 0;
    $('log-body').replaceChildren();
    $('mylog-body').replaceChildren();
    $('end').hidden = true;
    showError(message);
    showTokenForm();
  }

  // --- state on screen -------------------------------------------------------

  let connection = 'Not connected';

  // The status pill says how the page follows the room, or that the room has ended.
  function setStatus(text) {
    connection = text;
    const ended = Boolean(view && view.ended) && text.startsWith('Live');
    $('status').textContent = ended ? 'Room ended' : text;
    $('status').classList.toggle('ended', ended);
  }

  function showError(message, code) {
    window.duneLedger.showError(message);
    unreachable = code === 'unreachable';
  }

  function clearError() {
    window.duneLedger.clearError();
    unreachable = false;
  }

  let shown = '';
  let presence = null; // {faction: open pages}

  function apply(next) {
    if (!next || (view && next.version < view.version)) return;
    const text = JSON.stringify(next);
    if (text === shown) return; // the same view again (a poll, a reconnect): keep the screen
    shown = text;
    const changed = !view || next.version !== view.version;
    if (view && view.me && next.me) remember(view, next);
    view = next;
    render();
    seedOnce();
    ceremony();
    if (changed) loadLog().catch((e) => showError(e.message));
  }

  // My log: what changed in my own hand and spice between two of my views, as one entry,
  // its lines in the order such things happen: a purchase (paid, then the card drawn) as
  // one line, a bonus card, spice paid, cards that left, cards taken, spice received.
  function remember(before, after) {
    const had = new Map(before.me.hand.map((c) => [c.id, c]));
    const has = new Map(after.me.hand.map((c) => [c.id, c]));
    const taken = new Map([...has].filter(([id]) => !had.has(id)));
    const gone = [...had.values()].filter((c) => !has.has(c.id));
    let paid = before.me.spice - after.me.spice;
    const lines = [];
    const earlier = new Map((before.receipts || []).map((r) => [r.event, r]));
    for (const r of after.receipts || []) {
      const was = earlier.get(r.event);
      if (!was) {
        // An ally's support may have paid part of the price: only my own spice counts.
        paid -= Math.min(r.amount, Math.max(0, paid));
        taken.delete(r.card);
        lines.push(`You bought ${cardName(r.card, after)} for ${r.amount} spice`
          + (paid === 0 ? ` (${after.me.spice} left).` : '.'));
      }
      if (r.bonus && !(was && was.bonus)) {
        taken.delete(r.bonus);
        lines.push(`You drew ${cardName(r.bonus, after)} as your bonus card.`);
      }
    }
    if (paid > 0) lines.push(`You paid ${paid} spice (${after.me.spice} left).`);
    for (const c of gone) lines.push(`${c.name} left your hand.`);
    for (const c of taken.values()) lines.push(`You took ${c.name}.`);
    if (paid < 0) lines.push(`You received ${-paid} spice (${after.me.spice} now).`);
    if (lines.length) mine.push({ version: after.version, lines });
    while (mine.length > 100) mine.shift();
  }

  const actions = (type) => (view.actions || []).filter((a) => a.type === type);
  const cardName = (id, v = view) => {
    if (!v.me) return id;
    const all = [...v.me.hand, ...(v.nullentropy && v.nullentropy.search
      && v.nullentropy.search.cards || []), ...(v.semuta && v.semuta.cards || []),
      ...biddingCards(v)];
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

  // A card's mark, drawn here (inline SVG, no file): a blade, a shield, a star, a
  // broken ring.
  const SVG = 'http://www.w3.org/2000/svg';
  const MARKS = {
    weapon: 'M12 2l2 3v9h-4V5zM7 15h10v2h-3v3l-2 2-2-2v-3H7z',
    defense: 'M12 2l8 3v6c0 5-3.5 9-8 11-4.5-2-8-6-8-11V5z',
    special: 'M12 2l2.9 6.3 6.9.7-5.2 4.6 1.5 6.8L12 17l-6.1 3.4 1.5-6.8L2.2 9l6.9-.7z',
    worthless: 'M12 3a9 9 0 1 0 0 18 9 9 0 0 0 0-18zm0 3a6 6 0 0 1 4.9 9.5L8.5 7.1A6 6 0 0 1 12 6zm-4.9 2.5 8.4 8.4A6 6 0 0 1 7.1 8.5z',
  };

  function mark(category) {
    const svg = document.createElementNS(SVG, 'svg');
    svg.setAttribute('viewBox', '0 0 24 24');
    svg.setAttribute('class', 'mark');
    svg.setAttribute('aria-hidden', 'true');
    svg.setAttribute('focusable', 'false');
    const path = document.createElementNS(SVG, 'path');
    path.setAttribute('d', MARKS[category] || MARKS.special);
    svg.append(path);
    return svg;
  }

  function cardTile(card, tag = 'li', ...extra) {
    return h(tag, { class: 'card cat-' + card.category, 'data-card': card.id },
      mark(card.category),
      h('span', { class: 'name', text: card.name }),
      h('span', { class: 'cat', text: card.category }), ...extra);
  }

  const faction = (f, tag = 'span') => h(tag, { class: 'faction f-' + f, 'data-faction': f },
    fname(f));
  const spice = (n, id) => h('span', { class: 'spice', id: id || null },
    h('span', { class: 'spice-token', 'aria-hidden': 'true' }), `${n} spice`);

  function render() {
    // Keep the keyboard where it was: the control with the same key gets focus back.
    const active = document.activeElement;
    const focused = refocus || (active && active !== document.body && active.dataset
      ? active.dataset.key : null);
    // ...and what a player was typing stays typed.
    const typed = new Map(Array.from(document.querySelectorAll('input[data-key], select[data-key]'))
      .map((el) => [el.dataset.key, el.value]));
    const used = new Set();
    const take = (type) => {
      used.add(type);
      return actions(type);
    };

    $('where').replaceChildren(...(view.seat ? [faction(view.seat, 'strong'), ' · '] : []),
      `Turn ${view.turn}, ${named('phases', view.phase)}`);
    setStatus(connection);
    root.dataset.version = String(view.version);
    $('room-version').textContent = String(view.version);
    $('room-mode').textContent = view.mode;
    renderMe();
    renderOthers();
    renderPiles();
    renderBidding(take);
    renderBox(take('begin_search'), take('select_card'));
    renderDecision(take('ambassador_decide'), take('ambassador_copy'));
    renderResponse(take('respond'));
    renderGift(take('answer_gift'));
    renderTruthtrance(take('answer_truthtrance'));
    renderSemuta(take('semuta'));
    renderAmbassador();
    renderAutopilot(take('set_autopilot'));
    renderFairness(take('seed'));
    ['seat_key', 'seed_commit', 'seed_reveal'].forEach(take); // the ceremony sends these itself
    renderEnd();
    renderMore((view.actions || []).filter((a) => !used.has(a.type)));
    renderMine();
    // The decision column is there only while it holds something: no empty column.
    const side = document.querySelector('#seat .side');
    side.hidden = Array.from(side.children).every((panel) => panel.hidden);
    $('seat').classList.toggle('no-side', side.hidden);

    for (const el of document.querySelectorAll('input[data-key], select[data-key]')) {
      if (typed.has(el.dataset.key)) el.value = typed.get(el.dataset.key);
    }
    if (focused) {
      const again = Array.from(document.querySelectorAll('[data-key]'))
        .find((el) => el.dataset.key === focused && !el.disabled);
      if (again) {
        again.focus();
        refocus = null;
        nextFocus = false;
      }
    }
    if (nextFocus) {
      nextFocus = false;
      refocus = null;
      focusNext();
    }
  }

  // The next thing to do: the first live control of a decision, a window, an offer, the
  // Box (in that order on the screen), else my seat, where what just changed shows.
  function focusNext() {
    // A window or a decision waits on the round, so it comes before the Bidding panel.
    for (const id of ['box', 'decision', 'response', 'gift', 'truthtrance', 'semuta', 'bidding']) {
      const next = document.querySelector(`#${id}:not([hidden]) button:not([disabled]):not(.step)`);
      if (next) return next.focus();
    }
    // In a round, the round is what a player watches next (on a phone, where it was).
    if (!$('bidding').hidden) return $('bidding-title').focus();
    if (!$('me').hidden) $('me-title').focus();
  }

  function renderMine() {
    if (!view.me) return;
    $('mylog-body').replaceChildren(...mine.map((m) => h('li', { class: 'move' },
      m.lines.map((text) => h('p', { class: 'line', text })))));
    $('mylog').hidden = mine.length === 0;
  }

  function renderMe() {
    const me = view.me;
    if (!me) return fill('me');
    const receipts = (view.receipts || []).map((r) => h('li', {},
      `${cardName(r.card)} for ${r.amount} spice`
      + (r.bonus ? `, and ${cardName(r.bonus)} as your bonus card` : '')
      + (r.stage === 'finish' ? '' : ` (waiting for ${named('stages', r.stage)})`)));
    fill('me',
      h('p', { class: 'banner f-' + me.faction }, faction(me.faction, 'strong'),
        me.ally ? h('span', { class: 'ally' }, ' allied with ', faction(me.ally)) : null),
      h('dl', { class: 'facts' },
        h('dt', { text: 'Spice' }), h('dd', {}, spice(me.spice, 'my-spice')),
        h('dt', { text: 'Reserved' }),
        h('dd', { id: 'my-reserved', text: String(me.reserved) }),
        h('dt', { text: 'Hand' }),
        h('dd', { text: `${me.hand.length} of ${plural(me.hand_limit, 'card')}` })),
      h('h3', { text: 'My hand' }),
      me.hand.length ? h('ul', { class: 'hand', id: 'my-hand' }, me.hand.map((c) => cardTile(c)))
        : h('p', { class: 'hint', text: 'No cards.' }),
      receipts.length ? [h('h3', { text: 'My purchases' }), h('ul', {}, receipts)] : null);
    $('me').hidden = false;
  }

  function renderOthers() {
    const open = (f) => (presence ? (presence[f] || 0) > 0 : null);
    fill('others', h('ul', { class: 'seats' }, view.seats.map((s) => {
      const here = open(s.faction);
      return h('li', { class: 'seat f-' + s.faction, 'data-seat': s.faction },
        h('span', { class: 'seat-name' }, faction(s.faction, 'strong'),
          here === null ? null : h('span', {
            class: 'presence ' + (here ? 'on' : 'off'), 'data-presence': here ? 'open' : 'closed',
          }, here ? 'at the table' : 'away')),
        h('span', { class: 'seat-cards', text: plural(s.hand_count, 'card') }),
        s.ally ? h('span', { class: 'seat-ally' }, 'ally ', faction(s.ally)) : null,
        s.autopilot ? h('span', { class: 'seat-autopilot', text: `on autopilot (${s.autopilot})` })
          : null);
    })));
  }

  function renderPiles() {
    const top = view.discard.top;
    fill('piles', h('div', { class: 'piles' },
      h('div', { class: 'pile deck' }, h('span', { class: 'pile-count', text: String(view.deck.count) }),
        h('span', { text: 'in the deck' })),
      h('div', { class: 'pile discard' }, h('span', { class: 'pile-count', text: String(view.discard.count) }),
        h('span', { text: 'in the discard' })),
      h('div', { class: 'pile top', id: 'discard-top' }, top
        ? cardTile(top, 'div', h('span', { class: 'hint on-top', text: 'on top of the discard' }))
        : h('span', { text: 'The discard is empty.' }))));
  }

  function renderBox(begin, select) {
    const box = view.nullentropy;
    const parts = [];
    if (view.search && (!box || !box.search)) {
      parts.push(h('p', { class: 'notice', id: 'search-open' },
        `${fname(view.search.owner)} paid for a Box search and is choosing a card.`));
    }
    if (box) {
      const search = box.search;
      const notice = box.full_hand_exchange
        ? h('p', { class: 'warning', id: 'full-hand-notice', role: 'note' },
          h('strong', { text: 'Provisional: ' }), box.notice
            || 'your hand is at its limit; the Box leaves as the card you take arrives.')
        : null;
      if (!search) {
        parts.push(h('p', { id: 'box-says' }, `You hold the ${box.card.name}. ${box.says || ''}`));
        parts.push(notice);
        if (begin.length) {
          parts.push(...begin.map((a) => actionButton(a, 'Pay 2 spice and search the discard',
            'primary')));
        } else {
          const reason = box.blocked ? (BLOCKED[box.blocked] || box.blocked) : 'not now';
          parts.push(h('button', { type: 'button', disabled: true, 'aria-describedby': 'box-blocked' },
            'Pay 2 spice and search the discard'));
          parts.push(h('p', { class: 'blocked', id: 'box-blocked', 'data-blocked': box.blocked || null },
            `Not available: ${reason}.`));
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
            const tile = cardTile(card, 'li', action ? actionButton(action, `Take ${card.name}`) : null);
            tile.classList.add('candidate');
            return tile;
          })));
      }
    }
    fill('box', parts);
  }

  function renderDecision(decide, copy) {
    const d = view.decision;
    // The Ixian ally's replacement is the round's: the Bidding panel draws it.
    if (!d || d.kind === 'nullentropy' || d.kind === 'ix_replace') return fill('decision');
    const mine = d.player === view.seat;
    fill('decision',
      h('p', {}, mine ? 'Your decision.' : `${fname(d.player)} is deciding.`),
      d.token ? h('p', { text: `The ${fname(d.token)} ambassador in ${place(d.territory)}, `
        + `entered by ${fname(d.entrant)}.` }) : null,
      d.says ? h('p', { class: 'says', id: 'decision-says', text: d.says }) : null,
      h('div', { class: 'row wrap' },
        decide.map((a) => actionButton(a, a.trigger
          ? `Trigger it${a.beneficiary ? ' for ' + fname(a.beneficiary) : ''}` : 'Do not trigger it',
        a.trigger ? 'primary' : null)),
        copy.map((a) => actionButton(a, `Copy the ${fname(a.token)} ambassador`))));
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
    // Never more than the window's length: a clock a little off must not show 31 s of 30.
    const most = Number(el.dataset.seconds) || Infinity;
    const left = Math.min(most,
      Math.max(0, Math.ceil((Number(el.dataset.at) - (Date.now() + clockOffset)) / 1000 - 0.05)));
    el.textContent = left > 0 ? `${left} s left to answer` : 'Time is up: the window closes';
  }

  function renderResponse(respond) {
    const w = view.response;
    if (countdown) clearInterval(countdown);
    countdown = null;
    if (!w || w.kind === 'gift') return fill('response'); // the gift panel shows an offer
    const at = parseDeadline(w.deadline);
    const waiting = w.waiting || [];
    // Passing is the default; a Karama spends a card, so it asks once before it is sent.
    const pass = respond.filter((a) => a.action !== 'karama');
    const karama = respond.filter((a) => a.action === 'karama');
    const names = (list) => list.map(who).join(', ');
    fill('response',
      h('p', {}, h('strong', { text: w.name || named('windows', w.kind) }),
        w.payer ? ` · paid by ${fname(w.payer)}` + (w.amount !== undefined ? ` (${w.amount} spice)` : '')
          : '',
        w.beneficiary ? ` · for ${fname(w.beneficiary)}` : ''),
      w.says ? h('p', { class: 'says', id: 'response-says', text: w.says }) : null,
      at !== null ? h('p', { id: 'deadline', class: 'deadline', 'data-at': String(at),
        'data-seconds': w.seconds ? String(w.seconds) : null }) : null,
      h('p', { id: 'waiting' }, waiting.length ? `Waiting for: ${names(waiting)}` : 'Nobody is waited for.'),
      (w.passes || []).length ? h('p', { text: `Passed: ${names(w.passes)}` }) : null,
      respond.length ? h('div', { class: 'row wrap' },
        pass.map((a) => actionButton(a, 'Pass', 'primary')),
        karama.map((a) => askFirst(a, karamaLabel(a),
          `This spends your ${karamaCard(a)}: it goes to the discard pile and cancels `
          + `${named('windows', w.kind)}.`, `Yes, spend it: ${karamaLabel(a)}`))) : null);
    if (at !== null) {
      tick();
      countdown = setInterval(tick, 1000);
    }
  }

  let confirming = null; // the key of the action waiting for its one confirmation

  // An action that spends or loses a card asks once before it is sent: its button opens
  // a confirmation saying what will happen; "No" puts the button back, focused.
  function askFirst(action, label, says, yes) {
    const key = keyOf(action);
    if (confirming !== key) {
      return h('button', { type: 'button', 'data-key': 'ask:' + key,
        onclick: () => { confirming = key; refocus = key; render(); } }, label + '…');
    }
    return confirmation(label + '?', says, actionButton(action, yes, 'danger'),
      h('button', { type: 'button', 'data-key': 'keep:' + key,
        onclick: () => { confirming = null; refocus = 'ask:' + key; render(); } }, 'No, keep it'));
  }

  function karamaCard(a) {
    return a.card ? cardName(a.card) : 'Karama';
  }

  function place(territory) {
    return String(territory || '').replaceAll('_', ' ').replace(/\b\w/g, (c) => c.toUpperCase());
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
      g ? h('p', {}, `${fname(g.giver || 'richese')} offers ${what} to ${g.to ? fname(g.to) : 'an ally'}.`) : null,
      answer.length && w && w.says ? h('p', { class: 'says', text: w.says }) : null,
      w && !answer.length && (w.waiting || []).length
        ? h('p', { class: 'hint', text: `Waiting for ${w.waiting.map(who).join(', ')}.` }) : null,
      h('div', { class: 'row wrap' }, answer.map((a) => actionButton(a,
        a.accept ? `Accept ${what}` : 'Refuse the gift', a.accept ? 'primary' : null))));
  }

  function renderTruthtrance(answer) {
    const t = view.truthtrance;
    if (!t) return fill('truthtrance');
    const promised = (a) => (a.promise && a.promise.box ? ` and promise the fee of ${cardName(a.promise.box)}` : '');
    fill('truthtrance',
      h('p', {}, `${fname(t.asker)} asks ${fname(t.target)}:`), h('blockquote', { text: t.question }),
      answer.length && t.says ? h('p', { class: 'says', id: 'truthtrance-says', text: t.says }) : null,
      answer.length ? h('div', { class: 'row wrap' }, answer.filter((a) => !a.free).map((a) =>
        actionButton(a, `Answer ${a.answer}${promised(a)}`, a.answer === 'yes' ? 'primary' : null)))
        : h('p', { class: 'hint', text: `Waiting for ${fname(t.target)}'s answer.` }),
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
        // An option in the game's words when they have a table named like the field (via).
        input = h('select', data, (spec.options || []).map((o) => h('option', { value: JSON.stringify(o),
          text: named(name, o) })));
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
      s && s.event ? h('p', { text: `${fname(s.discarder)} discarded: Semuta may react.` }) : null,
      s && s.queued ? h('p', { class: 'hint',
        text: `${plural(s.queued, 'more discard')} ${s.queued === 1 ? 'waits' : 'wait'} for Semuta.` })
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
        h('dt', { text: 'Token' }), h('dd', { text: `${fname(entry.token)} in ${place(entry.territory)}` }),
        h('dt', { text: 'Entered' }), h('dd', { text: `${fname(entry.entrant)}, ${named('via', entry.via)}` }),
        h('dt', { text: 'Now' }), h('dd', { id: 'ambassador-stage-name', text: named('stages', entry.stage) }),
        entry.beneficiary ? [h('dt', { text: 'For' }), h('dd', { text: fname(entry.beneficiary) })] : null,
        entry.payer ? [h('dt', { text: 'Paid' }),
          h('dd', { text: `${fname(entry.payer)}: ${entry.amount} spice, ${plural(entry.cards, 'card')}` })]
          : null)
        : null,
      placed.length ? h('p', {}, 'Placed: ' + placed.map(([t, k]) => `${fname(k)} in ${place(t)}`).join(', ')) : null,
      h('p', { class: 'hint' }, `Used: ${(amb.used || []).map(fname).join(', ') || 'none'}`));
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
      case 'distrans': return `Distrans: give ${cardName(a.give)} to ${fname(a.to)}`;
      case 'offer_gift': return `Offer ${card} to ${fname(a.to)}`;
      case 'ask_truthtrance': return `Ask ${fname(a.target)} a Truthtrance question`;
      case 'enter_territory': return 'Enter a territory' + (a.via ? ` ${named('via', a.via)}` : '');
      case 'guild_stop': return 'Stop a shipping cost (Guild)';
      default: {
        const fields = Object.entries(a).filter(([k]) => k !== 'type' && k !== 'free')
          .map(([k, v]) => `${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`);
        const name = a.type.replaceAll('_', ' ');
        return fields.length ? `${name} (${fields.join(', ')})` : name;
      }
    }
  }

  // A discard cannot be taken back: it asks once.
  function moreButton(a) {
    if (a.type !== 'discard') return actionButton(a, label(a));
    const card = cardName(a.card);
    return askFirst(a, label(a), `${card} goes face up on top of the discard pile; it does not `
      + 'come back to your hand.', `Yes, discard ${card}`);
  }

  function renderMore(rest) {
    const types = [...new Set(rest.map((a) => a.type))];
    fill('more', types.map((type) => {
      const group = rest.filter((a) => a.type === type);
      return h('div', { class: 'group' },
        h('div', { class: 'row wrap' }, group.filter((a) => !a.free).map(moreButton)),
        group.filter((a) => a.free).map((a) => freeForm(a, label(a))));
    }));
  }

  // --- the Bidding round (RULES 10) ------------------------------------------

  // The round as the view gives it: the card up for bid (its face only on the Atreides
  // page, the only view that holds it), the high bid, whose turn, who passed, the cache
  // sale; the controls only as `actions` lists them, a bid's amount bounded by the
  // action's own `free` bounds (what the seat can pay is the server's to say).
  const BIDDING = ['bid', 'pass_bid', 'karama_buy', 'bid_support', 'ix_set_aside', 'ix_replace',
    'richese_sale', 'richese_offer', 'sealed_bid'];
  const WHEN = { first: 'Sell a cache card first', last: 'Sell a cache card last',
    none: 'No cache sale this round' };
  const SPICE_TOP = 1000000; // RULES 8's bound on any amount
  const AUCTIONS = { once_around: 'once around', silent: 'silent' };
  // What the round waits for, when no card is up.
  const STAGE = {
    richese: () => (view.seat === 'richese' ? 'The cards are dealt once you answer.'
      : 'Waiting for Richese to say whether it sells a cache card; then the cards are dealt.'),
    ixians: () => (view.seat === 'ixians' ? 'The round waits for your choice.'
      : 'Waiting for the Ixians to set a dealt card aside.'),
    payment: () => 'The card is sold: its payment goes on.',
  };

  const biddingCards = (v) => {
    const b = v.bidding;
    if (!b) return [];
    const card = (c) => (c && typeof c === 'object' ? c : null);
    return [card(b.up && b.up.card), ...(b.dealt || []).map(card),
      card(b.sale && b.sale.card)].filter(Boolean);
  };

  // A card seen face down: the back of a Treachery card, the same tile for every card.
  const faceDown = (text) => h('div', { class: 'card back', id: 'up-card', 'data-face': 'down' },
    h('span', { class: 'name', text: 'Treachery card' }), h('span', { class: 'cat', text }));

  // The bounds of a written amount, as the action describes them.
  function amountOf(action) {
    const spec = (action.free && action.free.amount) || {};
    return { min: spec.min ?? 0, max: spec.max ?? spec.min ?? 0 };
  }

  // A spice amount with one less / one more beside it, and the button that sends it:
  // big enough for a thumb at 280 px. The key holds the bounds, so that an amount typed
  // under an old high bid is not kept once the high bid has moved.
  function amountForm(action, id, title, says, cls = 'primary') {
    const { free, ...command } = action;
    const { min, max } = amountOf(action);
    const key = `${keyOf(command)}:${min}:${max}`;
    const input = h('input', { id, type: 'number', min, max, step: '1', inputmode: 'numeric',
      value: String(min), required: true, 'data-key': key });
    const go = h('button', { type: 'submit', class: cls, 'data-key': key + ':send' });
    const say = () => { go.textContent = says(input.value || min); };
    const nudge = (by) => {
      const n = Math.min(max, Math.max(min, (Number(input.value) || min) + by));
      input.value = String(n);
      say();
    };
    input.addEventListener('input', say);
    const form = h('form', { class: 'amount' },
      // A bound at the top of RULES 8 (a Karama bid's) reads as no bound.
      h('label', { for: id, text: max >= SPICE_TOP ? `${title} (${min} spice or more)`
        : `${title} (${min} to ${max} spice)` }),
      h('div', { class: 'stepper' },
        h('button', { type: 'button', class: 'step', 'aria-label': `${title}: one spice less`,
          'data-key': key + ':less', onclick: () => nudge(-1) }, '−'),
        input,
        h('button', { type: 'button', class: 'step', 'aria-label': `${title}: one spice more`,
          'data-key': key + ':more', onclick: () => nudge(1) }, '+')),
      go);
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      send({ ...command, amount: Number(input.value) }, go);
    });
    // The label follows a typed amount that the redraw gives back.
    queueMicrotask(say);
    say();
    return form;
  }

  // A command sent with an amount: a written one when `free` says so, else its own.
  function amountControl(action, id, title, says, cls) {
    if (action.free && action.free.amount) return amountForm(action, id, title, says, cls);
    return actionButton(action, says(action.amount), cls);
  }

  function biddingSeats(b) {
    const up = b.up || {};
    const eligible = new Set(b.eligible || []);
    const passed = new Set(up.passed || []);
    return h('ol', { class: 'bidders', id: 'bidders', 'aria-label': 'Bidding order' },
      (b.order || []).map((f) => {
        const notes = [];
        if (up.turn === f) notes.push(h('span', { class: 'tag turn', text: f === view.seat ? 'your turn' : 'to bid' }));
        if (up.high && up.high.seat === f) {
          notes.push(h('span', { class: 'tag high', text: `high bid, ${up.high.amount}` }));
        }
        if (passed.has(f)) notes.push(h('span', { class: 'tag', text: 'passed' }));
        if (!eligible.has(f)) notes.push(h('span', { class: 'tag', text: 'hand full' }));
        if (up.starter === f) notes.push(h('span', { class: 'tag', text: 'first to bid' }));
        return h('li', { class: 'bidder f-' + f + (up.turn === f ? ' now' : ''), 'data-bidder': f },
          faction(f), ' ', notes);
      }));
  }

  function renderBidding(take) {
    const b = view.bidding;
    const a = Object.fromEntries(BIDDING.map((t) => [t, take(t)]));
    if (!b && !Object.values(a).some((list) => list.length)) return fill('bidding');
    const up = b && b.up;
    const parts = [];
    if (b) {
      // `cards_left` counts the card up for bid too.
      const left = b.cards_left ?? 0;
      if (up || left) {
        parts.push(h('p', { id: 'bidding-where' }, up
          ? `Card ${up.index} up for bid; ${plural(Math.max(0, left - 1), 'more card')} after it.`
          : `${plural(left, 'card')} left in the auction.`));
      }
      const waiting = STAGE[b.stage];
      if (waiting) parts.push(h('p', { class: 'notice', id: 'bidding-waiting', text: waiting(b) }));
    }
    if (up) {
      const seen = up.card && typeof up.card === 'object' ? up.card : null;
      parts.push(seen
        ? cardTile(seen, 'div', h('span', { class: 'hint on-top', id: 'up-seen',
          text: 'Only you see it (prescience).' }))
        : faceDown(b.order.includes('atreides') ? 'face down: only Atreides sees it (prescience)'
          : 'face down until it is bought'));
      const high = up.high;
      parts.push(h('p', { class: 'high', id: 'high-bid' }, high
        ? [h('strong', { text: `${high.amount} spice` }), ` by ${who(high.seat)}`,
          high.karama ? ' (with Karama: nothing paid if it wins)' : '']
        : 'No bid yet.'));
      parts.push(h('p', { id: 'turn', class: up.turn === view.seat ? 'turn mine' : 'turn' },
        up.turn ? (up.turn === view.seat ? 'Your turn to bid or pass.' : `${fname(up.turn)} to bid or pass.`)
          : ''));
    }
    // The cache sale, when there is one, above the controls it takes (Bid, Pass, a seal).
    if (b && b.sale) parts.push(saleFacts(b.sale));
    // My controls: bid and pass first, where the thumb is.
    const bids = a.bid.filter((x) => !x.karama);
    const karamaBids = a.bid.filter((x) => x.karama);
    if (bids.length || a.pass_bid.length) {
      parts.push(h('div', { class: 'bid-controls', id: 'bid-controls' },
        bids.map((x) => amountControl(x, 'bid-amount', 'Your bid', (n) => `Bid ${n} spice`)),
        a.pass_bid.map((x) => actionButton(x, 'Pass', bids.length ? 'pass' : 'primary pass'))));
    }
    for (const x of karamaBids) {
      parts.push(unfold('karama-bid:' + x.karama, `Bid with ${cardName(x.karama)}`, () => [
        h('p', { class: 'hint', text: `Any amount: ${cardName(x.karama)} is held while the bid `
          + 'stands, goes to the discard if it wins, and then nothing is paid.' }),
        amountControl(x, 'karama-amount-' + x.karama, 'Karama bid',
          (n) => `Bid ${n} with ${cardName(x.karama)}`)]));
    }
    if (a.karama_buy.length) {
      parts.push(h('div', { class: 'row wrap' }, a.karama_buy.map((x) => askFirst(x,
        `Buy it with ${cardName(x.karama)}`, `This spends your ${cardName(x.karama)}: it goes to `
        + 'the discard pile and the card up for bid is yours for nothing.',
        `Yes, spend ${cardName(x.karama)}`))));
    }
    if (b && b.dealt && b.dealt.length) parts.push(ixChoice(b.dealt, a.ix_set_aside));
    const replacing = view.decision && view.decision.kind === 'ix_replace' ? view.decision : null;
    if (a.ix_replace.length) {
      parts.push(h('p', { id: 'replacement', text: 'As the Ixians\' ally you may discard the card '
        + 'you just bought and draw the top card of the deck instead.' }),
      h('div', { class: 'row wrap' }, a.ix_replace.map((x) => actionButton(x,
        x.accept ? 'Discard it and draw' : 'Keep it', x.accept ? null : 'primary'))));
    } else if (replacing) {
      parts.push(h('p', { class: 'notice', id: 'replacement', text: `${fname(replacing.player)} may `
        + 'discard the card it bought and draw the top card of the deck instead.' }));
    }
    if (a.richese_sale.length) {
      parts.push(h('p', { text: 'Will you sell a card of your cache this round?' }),
        h('div', { class: 'row wrap' }, a.richese_sale.map((x) => actionButton(x,
          WHEN[x.when] || x.when, x.when === 'none' ? null : 'primary'))));
    }
    if (a.richese_offer.length) parts.push(offerChoice(a.richese_offer));
    for (const x of a.sealed_bid) {
      parts.push(amountControl(x, 'sealed-amount', 'Your sealed bid', (n) => `Seal my bid of ${n} spice`),
        h('p', { class: 'hint', text: 'One bid, sent once. Nobody sees an amount until every sealed '
          + 'bid is in; then all are shown at once.' }));
    }
    if (b && view.me && b.order.includes(view.seat) && !(b.eligible || []).includes(view.seat)) {
      parts.push(h('p', { class: 'hint', id: 'not-eligible', text: 'Your hand is full: you do not bid '
        + 'this round.' }));
    }
    if (b) parts.push(biddingSeats(b));
    const support = b && b.support ? Object.entries(b.support).filter(([, n]) => supportAmount(n) > 0) : [];
    if (support.length) {
      parts.push(h('p', { id: 'support', class: 'hint' }, support.map(([f, n], i) =>
        [i ? ' ' : '', `${possessive(f)} support for ${whose(allyOf(f))} bids: up to `
          + `${supportAmount(n)} spice.`])));
    }
    for (const x of a.bid_support) {
      parts.push(unfold('support', 'Support my ally\'s bids', () => [
        h('p', { class: 'hint', text: 'The amount is reserved from your spice until the round '
          + 'ends; your ally pays from it only what its own spice does not cover.' }),
        amountControl(x, 'support-amount', 'Support', (n) => `Support with ${n} spice`, null)]));
    }
    fill('bidding', parts);
  }

  // What is used less (a Karama bid, the support) stays folded under a button until
  // asked for, and stays open across redraws.
  const unfolded = new Set();

  function unfold(key, title, body) {
    const open = unfolded.has(key);
    return h('div', { class: 'unfold' },
      h('button', { type: 'button', class: 'quiet', 'aria-expanded': open ? 'true' : 'false',
        'data-key': 'unfold:' + key, onclick: () => {
          if (open) unfolded.delete(key); else unfolded.add(key);
          refocus = 'unfold:' + key;
          render();
        } }, (open ? '▾ ' : '▸ ') + title),
      open ? body() : null);
  }

  const allyOf = (f) => (view.me && f === view.seat ? view.me.ally
    : (view.seats.find((s) => s.faction === f) || {}).ally);

  const possessive = (f) => (fname(f).endsWith('s') ? `${fname(f)}'` : `${fname(f)}'s`);
  const whose = (f) => (!f ? 'its ally\'s' : f === view.seat ? 'your' : possessive(f));

  const supportAmount = (n) => (typeof n === 'number' ? n : (n && n.amount) || 0);

  // The Ixians see every dealt card and put one on the top or bottom of the deck.
  function ixChoice(dealt, setAside) {
    const cards = dealt.map((c) => (typeof c === 'object' ? c : { id: c, name: cardName(c), category: 'special' }));
    return h('div', { id: 'ix-choice' },
      h('p', { text: setAside.length ? 'Choose one card to set aside, on the top or the bottom of the '
        + 'deck; the others are shuffled and auctioned.' : 'The cards dealt for this round:' }),
      h('ul', { class: 'candidates', 'aria-label': 'The dealt cards' }, cards.map((c) => {
        const mineTo = setAside.filter((x) => x.card === c.id);
        const tile = cardTile(c, 'li', mineTo.length ? h('div', { class: 'row wrap' },
          mineTo.map((x) => {
            const button = actionButton(x, x.where === 'top' ? 'On top' : 'At the bottom');
            button.setAttribute('aria-label', x.where === 'top' ? `${c.name} on top of the deck`
              : `${c.name} at the bottom of the deck`);
            return button;
          })) : null);
        tile.classList.add('candidate');
        return tile;
      })));
  }

  // Richese names the cache card and the auction; each choice is one action. The view
  // holds no face for a cache card, so its name is its id written out.
  const titled = (id) => String(id).replace(/-\d+$/, '').split('-')
    .map((w) => w.charAt(0).toUpperCase() + w.slice(1)).join(' ');

  function offerChoice(offers) {
    const cards = [...new Set(offers.map((x) => x.card))];
    return h('div', { id: 'sale-choice' },
      h('p', { text: 'Your sale comes up: name the cache card and how it is auctioned.' }),
      h('ul', { class: 'candidates', 'aria-label': 'Cache cards to sell' }, cards.map((id) => {
        const name = cardName(id) === id ? titled(id) : cardName(id);
        return h('li', { class: 'card candidate offer', 'data-card': id },
          h('span', { class: 'name', text: name }),
          h('div', { class: 'row wrap' }, offers.filter((x) => x.card === id).map((x) => {
            const button = actionButton(x, AUCTIONS[x.auction] ? `Sell ${AUCTIONS[x.auction]}` : x.auction);
            button.setAttribute('aria-label', `Sell ${name} ${AUCTIONS[x.auction] || x.auction}`);
            return button;
          })));
      })));
  }

  // The cache sale: the card (public once named), the auction, the turn and high bid once
  // around; for a silent one, who has sent a sealed bid, and the amounts only once all
  // are in (the view holds none before).
  function saleFacts(sale) {
    const card = sale.card && typeof sale.card === 'object' ? sale.card : null;
    const amounts = sale.amounts ? Object.entries(sale.amounts) : [];
    const bidders = sale.bidders || [];
    const sealed = sale.sealed || [];
    const silent = sale.auction === 'silent';
    return h('div', { id: 'sale' },
      h('h3', { text: `Richese's cache sale${sale.auction ? ', ' + AUCTIONS[sale.auction] : ''}` }),
      card ? cardTile(card, 'div', h('span', { class: 'hint on-top', text: 'from the Richese cache' }))
        : h('p', { class: 'hint', text: sale.when === 'last' ? 'To come after the other cards.'
          : 'To come before the other cards.' }),
      card && !silent ? [
        h('p', { class: 'high', id: 'sale-high' }, sale.high
          ? [h('strong', { text: `${sale.high.amount} spice` }), ` by ${who(sale.high.seat)}`]
          : 'No bid yet.'),
        sale.turn ? h('p', { id: 'sale-turn', class: sale.turn === view.seat ? 'turn mine' : 'turn',
          text: sale.turn === view.seat ? 'Your turn: one bid or a pass, once around.'
            : `${fname(sale.turn)} to bid or pass, once around.` }) : null] : null,
      card && silent && !amounts.length ? h('p', { id: 'sealed-in' },
        sealed.length ? `Sealed bids in: ${sealed.map(who).join(', ')}. ` : 'No sealed bid in yet. ',
        bidders.filter((f) => !sealed.includes(f)).length
          ? `Waiting for ${bidders.filter((f) => !sealed.includes(f)).map(who).join(', ')}.` : '') : null,
      amounts.length ? h('ul', { id: 'sealed-bids', class: 'stack', 'aria-label': 'The sealed bids' },
        amounts.map(([f, n]) => h('li', {}, faction(f), ` ${n} spice`))) : null);
  }

  // --- fair dealing (RULES 9) ------------------------------------------------

  const fair = window.duneFairness;
  const MODES = {
    committed: 'Committed: every shuffle comes from a secret this room fixed when it was '
      + 'created and from the seats\' seeds, so the server could not choose the order of the '
      + 'deck. Once the room ends, anyone at the table can check every shuffle.',
    seeded: 'Seeded: a fixed seed makes this room repeatable (a demo or a test). There is '
      + 'nothing to verify.',
    layout: 'The layout set the order of the deck. There is nothing to verify.',
  };
  const STAGES = {
    commit: 'Commit: each seat\'s page commits to a seed it keeps secret. The cards are dealt '
      + 'once the seeds are revealed.',
    reveal: 'Reveal: the commitments are fixed; each seat\'s page reveals its seed.',
    dealt: 'Dealt: the seeds and their mix are fixed for the rest of the room.',
  };
  let seeding = false; // this page already sent the seat's first seed (a v1 room)
  let publicKey = null; // GET /keys, read once the room has ended
  let keeping = null; // the promise of this browser's record for the seat (fairness.js)
  let held = null; // that record, once read: the seat's key pair, seed and commitment
  let cannot = null; // why this browser cannot hold a seat key here, or null
  let stepping = false; // a step of the ceremony is on its way
  let checked = null; // the in-browser check: null, 'running', or its result
  const prints = new Map(); // a public key -> its short fingerprint

  const v2 = () => Boolean(view && view.fairness && view.fairness.algorithm === fair.V2);

  function forget() {
    keeping = null;
    held = null;
    stepping = false;
    checked = null;
  }

  // This browser's key and seed for the seat, made on the first open and kept in
  // IndexedDB: one promise, so that two steps never make two keys.
  function holding() {
    if (!keeping) {
      const seat = view.seat;
      keeping = fair.holding(view.room, seat, view.fairness.commitment).then((record) => {
        held = record;
        return record;
      }, (e) => {
        cannot = `This browser cannot make a seat key (${e.message}): nothing protects this seat `
          + 'against commands sent in its name.';
        throw e;
      });
    }
    return keeping;
  }

  // Every command this page sends carries the seat's signature once it holds a key.
  async function signed(command) {
    if (!v2() || watching || cannot) return command;
    return fair.sign(await holding(), command);
  }

  // The ceremony with no click (RULES 9.4): the key registered, a seed committed, then
  // revealed when the reveal stage begins. One step at a time, each on the view it sees.
  async function ceremony() {
    if (stepping || watching || !v2() || !view.seat) return;
    if (cannot === null) cannot = fair.unable();
    if (cannot) return render();
    stepping = true;
    try {
      while (await step()) { /* the next step reads the view the last one brought */ }
      // The panel says what this browser holds, which the steps may only now have read:
      // a view that came meanwhile was drawn before it.
      render();
      if (view.ended) await checkOnce();
    } catch (e) {
      render();
    } finally {
      stepping = false;
    }
  }

  async function step() {
    const f = view.fairness;
    const seat = view.seat;
    const record = await holding();
    if (view.ended || f.stage === 'dealt') return false;
    const offered = (type) => actions(type).length > 0;
    if (f.keys[seat] === null) {
      return offered('seat_key') && send({ type: 'seat_key', public_key: record.public_key });
    }
    if (f.keys[seat] !== record.public_key) return false; // said in the panel
    if (f.stage === 'commit' && f.commitments[seat] === null && offered('seed_commit')) {
      held = await fair.seeded(record);
      keeping = Promise.resolve(held);
      return send({ type: 'seed_commit', hash: held.hash });
    }
    if (f.stage === 'reveal' && record.seed && f.commitments[seat] === record.hash
        && f.seeds[seat] === null && offered('seed_reveal')) {
      held = { ...record, reveal_sent: true };
      keeping = Promise.resolve(held);
      await fair.keep(held);
      return send({ type: 'seed_reveal', value: held.seed });
    }
    return false;
  }

  function printOf(key) {
    if (!prints.has(key)) {
      prints.set(key, '…');
      fair.fingerprint(key).then((p) => { prints.set(key, p); if (view) render(); }, () => {});
    }
    return prints.get(key);
  }

  // The seat's first seed in a v1 room, from this browser, if the view's actions offer
  // the `seed` command.
  function seedOnce() {
    const f = view.fairness;
    if (seeding || watching || !f || f.mode !== 'committed' || f.seeds[view.seat]) return;
    if (!actions('seed').length) return;
    seeding = true;
    const bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes);
    send({ type: 'seed', value: Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('') });
  }

  // A long value shown short, the whole of it in a read-only field to select or copy.
  function whole(id, title, text) {
    return h('div', { class: 'long', id: id.replace('-whole', '') },
      h('p', {}, h('strong', { text: title + ' ' }),
        h('code', { class: 'mono', text: `${text.slice(0, 10)}…${text.slice(-6)}` })),
      h('details', {}, h('summary', { text: `The whole ${title.toLowerCase()}, to copy` }),
        h('input', { id, class: 'mono', type: 'text', readonly: true, value: text, spellcheck: 'false',
          'aria-label': `The whole ${title.toLowerCase()}`, onfocus: (e) => e.currentTarget.select() })));
  }

  const LIMITS = 'the server still knows every hidden card while the room runs (it keeps custody '
    + 'of them), and an operator who leaks the secret early leaks the deck.';

  function renderFairness(seed) {
    const f = view.fairness;
    if (!f) return fill('fairness');
    if (f.algorithm === fair.V2) return renderCeremony(f);
    const seeds = f.seeds || {};
    // My seat first, then the others (view.seats lists only the others to a seat).
    const everyone = [...(view.seat ? [view.seat] : []), ...view.seats.map((s) => s.faction)];
    fill('fairness',
      h('p', { id: 'fair-mode', 'data-mode': f.mode, text: MODES[f.mode] || `Mode: ${f.mode}.` }),
      f.commitment ? [h('p', {}, h('strong', { text: 'Algorithm ' }), h('code', { class: 'mono', text: f.algorithm })),
        whole('commitment-whole', 'Commitment', f.commitment)] : null,
      f.mode === 'committed' ? [
        h('h3', { text: 'Seeds' }),
        h('ul', { class: 'seeds', id: 'seeds' }, everyone.map((f) => h('li', { 'data-seed': f },
          faction(f), ' ', seeds[f]
            ? h('code', { class: 'mono', text: seeds[f] })
            : h('span', { class: 'hint', text: 'no seed yet' })))),
        seed.length ? seedForm(seed[0]) : null,
        h('p', { class: 'hint', id: 'fair-limits' }, h('strong', { text: 'What this does not guarantee: ' }),
          LIMITS)] : null);
  }

  // A committed room's ceremony (RULES 9.4): the stage, each seat's key, commitment and
  // reveal as the view shows them (public), this browser's part, and what is not
  // guaranteed. Nothing here comes from another seat beyond its public hash and key.
  function renderCeremony(f) {
    const everyone = [...(view.seat ? [view.seat] : []), ...view.seats.map((s) => s.faction)];
    const withheld = f.withheld || [];
    const unkeyed = everyone.filter((s) => !f.keys[s]);
    const state = (s) => {
      if (f.seeds[s]) return 'revealed';
      if (withheld.includes(s)) return 'withheld';
      if (f.commitments[s]) return f.stage === 'commit' ? 'committed' : 'committed, not revealed yet';
      return f.stage === 'commit' ? 'not committed yet' : 'did not commit';
    };
    fill('fairness',
      h('p', { id: 'fair-mode', 'data-mode': f.mode, text: MODES.committed }),
      h('p', { id: 'fair-stage', 'data-stage': f.stage }, h('strong', { text: 'Stage ' }), STAGES[f.stage] || f.stage),
      watching ? null : myPart(f),
      h('ul', { class: 'seeds', id: 'ceremony' }, everyone.map((s) => h('li', {
        'data-ceremony': s, 'data-state': state(s).split(',')[0].replaceAll(' ', '-') },
      faction(s), ' ', h('span', { class: withheld.includes(s) ? 'warn-text' : null, text: state(s) }),
      f.commitments[s] ? h('code', { class: 'mono hint', text: ` ${f.commitments[s].slice(0, 8)}…` }) : null,
      h('span', { class: 'hint', text: f.keys[s] ? ` · key ${printOf(f.keys[s])}` : ' · no key' })))),
      withheld.length ? h('p', { class: 'says', id: 'fair-withheld', text: `Withheld reveals: `
        + `${withheld.map(who).join(', ')}. A withheld reveal lets whoever controls its seat choose `
        + 'between two deals.' }) : null,
      unkeyed.length ? h('p', { class: 'hint', id: 'fair-unkeyed', text: `No seat key: ${unkeyed.map(who).join(', ')}. `
        + 'Nothing protects a seat without a key against commands sent in its name.' }) : null,
      whole('commitment-whole', 'Commitment', f.commitment),
      f.mix ? whole('mix-whole', 'Mix', f.mix) : null,
      h('p', { class: 'hint', id: 'fair-limits' }, h('strong', { text: 'What this does not guarantee: ' }),
        LIMITS + ' Each withheld reveal lets its seat choose between two deals, and is shown.'));
  }

  // What this browser holds for the seat, or why it holds nothing.
  function myPart(f) {
    const seat = view.seat;
    const says = (text, cls = 'says') => h('p', { class: cls, id: 'fair-me', text });
    if (cannot) return says(cannot, 'error-text');
    if (!held) return says('Reading this seat\'s key in this browser…', 'hint');
    if (f.withheld.includes(seat) && held.reveal_sent) {
      return says('This page sent its reveal, and the deal recorded it as withheld: the server '
        + 'dealt without it. That is what an operator choosing among deals looks like.', 'error-text');
    }
    if (!f.keys[seat]) return says('Registering this browser\'s key for the seat…', 'hint');
    if (f.keys[seat] !== held.public_key) {
      return says('This seat\'s key was registered by another browser: this page cannot sign for '
        + 'it, and the server refuses its commands. Play from the browser that holds the key.', 'error-text');
    }
    return says(`This browser holds this seat's key (${printOf(held.public_key)}), which it cannot `
      + 'export: every command this page sends is signed with it.'
      + (f.stage === 'commit' && held.hash ? ' Its seed stays in this browser until the reveal.' : ''), 'hint');
  }

  // After the end: the transcript, checked here with WebCrypto (RULES 9.8).
  async function checkOnce() {
    if (checked !== null || watching || !v2()) return;
    checked = 'running';
    render();
    try {
      const me = await holding();
      if (!me.hash) {
        checked = { skipped: 'This browser did not take part in the ceremony for this seat, so it '
          + 'holds nothing of its own to check: use dune-ledger verify.' };
      } else {
        const response = await reach(base + '/transcript', token);
        if (!response.ok) await read(response);
        const body = await response.text();
        if (!publicKey || publicKey.public_key === 'PUBLIC_KEY') publicKey = await call('/keys');
        const started = performance.now();
        const accepted = await fair.acceptedIds(view.room, view.seat);
        checked = await fair.check(body, { room: view.room, seat: view.seat, me,
          serverKey: publicKey.public_key, accepted });
        checked.ms = Math.round(performance.now() - started);
      }
    } catch (e) {
      checked = { ok: false, done: {}, failed: { check: 'transcript', detail: e.message } };
    }
    render();
  }

  function renderCheck() {
    if (watching || !v2() || checked === null) return null;
    if (checked === 'running') return h('p', { id: 'fair-check-result', class: 'hint', text: 'Checking the transcript in this browser…' });
    if (checked.skipped) return h('p', { id: 'fair-check-result', class: 'hint', text: checked.skipped });
    const { ok, done, failed, undealt } = checked;
    if (undealt) {
      return h('p', { id: 'fair-check-result', 'data-ok': 'true', class: 'says', text: 'The room ended '
        + 'before its deal: no card was dealt from a shuffle. Checked in this browser: the transcript\'s '
        + 'chain, the published secret against the commitment, and this seat\'s key.' });
    }
    return [
      h('h3', { text: 'Checked in this browser' }),
      h('p', { id: 'fair-check-result', 'data-ok': String(ok), class: ok ? 'says' : 'error-text' }, ok
        ? 'Every check below holds: each shuffle is the derivation of the room\'s committed secret '
          + 'and the seats\' seeds, and nothing was done in this seat\'s name without this '
          + 'browser\'s signature.'
        : `The check failed at "${failed.check.replaceAll('_', ' ')}": ${failed.detail}. Do not `
          + 'trust this room\'s outcome: keep the transcript, and check it with dune-ledger verify.'),
      h('ul', { class: 'checks', id: 'fair-checks' }, fair.CHECKS.map(([name, what]) => {
        const result = name in done ? 'holds' : failed && failed.check === name ? 'fails' : 'not reached';
        return h('li', { 'data-check': name, 'data-result': result.replace(' ', '-') },
          h('strong', { text: result === 'holds' ? 'Holds: ' : result === 'fails' ? 'Fails: ' : 'Not reached: ' }),
          what, name in done ? h('span', { class: 'hint', text: ` (${done[name]})` }) : null);
      })),
      h('p', { class: 'hint', id: 'fair-check-took', text: `Checked in ${checked.ms} ms. Not checked here: `
        + 'the re-execution of every command and the deck\'s order at creation. dune-ledger verify '
        + 'checks those too.' })];
  }

  // The end, first on the page: no command is taken any more; the transcript to check.
  function renderEnd() {
    if (!view.ended) return fill('end');
    const f = view.fairness;
    const file = `transcript-${room}.jsonl`;
    const key = publicKey ? publicKey.public_key : 'PUBLIC_KEY';
    // Only a committed room's shuffles can be checked (RULES 9); any transcript's chain can.
    const committed = Boolean(f && f.mode === 'committed');
    fill('end',
      h('p', { id: 'ended', text: `It ended at version ${view.ended}: no command is taken any more. `
        + 'The transcript holds every event, hidden ones too'
        + (committed ? ', so anyone at the table can check every shuffle.' : '.') }),
      renderCheck(),
      f && f.secret ? whole('secret-whole', 'Published secret', f.secret) : null,
      h('div', { class: 'row wrap' }, h('button', { type: 'button', id: 'transcript', class: 'primary',
        'data-key': 'transcript', onclick: (e) => downloadTranscript(e.currentTarget, file) },
      'Download the transcript')),
      h('p', { class: 'hint', text: committed ? 'Check every shuffle on your own computer:'
        : 'Check it on your own computer:' }),
      h('pre', { class: 'mono', id: 'verify-command', tabindex: '0', 'aria-label': 'The command to verify it',
        text: `dune-ledger verify ${file} --key ${key}` }));
    if (!publicKey) readKey();
  }

  function seedForm(action) {
    const input = h('input', { id: 'seed-value', 'data-key': 'seed-value', type: 'text', required: true,
      minlength: '1', maxlength: '64', pattern: '[ -~]{1,64}', autocomplete: 'off', spellcheck: 'false' });
    const form = h('form', { class: 'stack free', id: 'seed-form' },
      h('label', { for: 'seed-value', text: 'My own seed (1 to 64 printable ASCII characters, public)' }),
      input, h('button', { type: 'submit', 'data-key': keyOf(action) }, 'Set my seed'));
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      const value = input.value;
      input.value = '';
      send({ type: 'seed', value }, form.querySelector('button'));
    });
    return form;
  }

  async function readKey() {
    try {
      publicKey = await call('/keys');
      render();
    } catch (e) {
      publicKey = { public_key: 'PUBLIC_KEY' }; // no key served: the command keeps its placeholder
    }
  }

  async function downloadTranscript(button, file) {
    clearError();
    button.disabled = true;
    try {
      await download(base + '/transcript', token, file);
    } catch (e) {
      showError(e.message);
    } finally {
      button.disabled = false;
    }
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

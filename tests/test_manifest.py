"""The normative manifest (conformance/manifest/): extraction from the spec XML, numbering,
ids and the public API."""

from __future__ import annotations

import pytest

from amqpspec.conformance import manifest
from amqpspec.conformance.manifest import extract, spec


def test_committed_sentences_equal_a_fresh_extraction() -> None:
    assert extract.SENTENCES_FILE.read_text(encoding="utf-8") == extract.render(), (
        "sentences.toml is stale: python -m amqpspec.conformance.manifest.extract"
    )


@pytest.mark.parametrize(
    ("number", "title"),
    [
        ("1.1.3", "Descriptor Values"),
        ("1.6.5", "uint"),
        ("1.6.16", "char"),
        ("1.6.21", "symbol"),
        ("1.6.24", "array"),
        ("2.2", "Version Negotiation"),
        ("2.3.2", "AMQP Frames"),
        ("2.4.5", "Idle Time-out of a Connection"),
        ("2.5.6", "Session Flow Control"),
        ("2.6.7", "Flow Control"),
        ("2.6.14", "Transferring Large Messages"),
        ("2.7.4", "flow"),
        ("2.7.9", "close"),
        ("2.8.15", "amqp-error"),
        ("2.8.18", "link-error"),
        ("2.8.19", "Constant Definitions"),
        ("3.2", "Message Format"),
        ("3.2.16", "Constant Definitions"),
        ("3.4.3", "rejected"),
        ("3.5.3", "source"),
        ("4.4.4.1", "Transactional Posting"),
        ("4.5.8", "transaction-error"),
        ("5.3.2", "SASL Negotiation"),
        ("5.3.3.1", "sasl-mechanisms"),
        ("5.3.3.6", "sasl-code"),
        ("5.3.4", "Constant Definitions"),
    ],
)
def test_sections_are_numbered_as_the_published_spec(number: str, title: str) -> None:
    assert manifest.sections()[number] == title


def test_known_sentences_have_their_ids_levels_and_exact_text() -> None:
    flow = manifest.sentence("2.7.4/flow.delivery-count.3")
    assert flow.part == 2 and flow.section == "2.7.4" and flow.level == "MUST"
    assert flow.text == (
        "When the flow state is being sent from the Receiver Endpoint to the Sender Endpoint "
        "this field MUST be set to the last known value of the corresponding Sending Endpoint."
    )
    assert flow.anchor == "flow.delivery-count"
    illegal = manifest.sentence("2.6.7/flow-control.11")
    assert illegal.level == "PROHIBITED" and illegal.keyword == "it is illegal"
    assert "i.e. the delivery-count is the same as or greater" in illegal.text  # one sentence
    inserted = manifest.sentence("3.2/message-format.1")
    assert inserted.text == (
        "If a section of the bare message is omitted, one may not be inserted by an intermediary."
    )
    assert manifest.sentence("3.2/message-format.2").level == "MUST NOT"
    assert manifest.sentence("2.4.1/opening-a-connection.1").keyword == "must"
    assert manifest.sentence("5.3.3.1/sasl-mechanisms.sasl-server-mechanisms.1").level == (
        "PROHIBITED"
    )


def test_unknown_id_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        manifest.sentence("2.7.4/flow.no-such-field.1")


def test_every_sentence_is_normative_and_quoted_from_the_xml() -> None:
    found = manifest.sentences()
    assert len(found) > 250
    levels = set(extract.LEVELS)
    for item in found.values():
        assert item.level in levels, item.id
        assert item.keyword and item.keyword in item.text, item.id
        assert spec.quoted_in_spec(item.text), item.id
        assert item.id.startswith(item.section + "/") and item.section in manifest.sections()
        assert item.part in range(1, 6)


def test_grants_and_descriptions_are_not_obligations() -> None:
    texts = [s.text for s in manifest.sentences().values()]
    # MAY grants: the receiver's choice on in-flight transfers after credit is reduced (2.6.7)
    assert not any(t.startswith("If the link-credit is reduced by the Receiver") for t in texts)
    # the description of an error condition
    assert not any("frame that is not permitted in the current state" in t for t in texts)
    # a conditional "should"
    assert not any(t.startswith("If this should happen") for t in texts)


def test_sentence_splitting_keeps_abbreviations_and_ends_at_full_stops() -> None:
    assert extract.split_sentences("A MUST b, i.e. C d. E SHOULD f (e.g. G). H.") == [
        "A MUST b, i.e. C d.",
        "E SHOULD f (e.g. G).",
        "H.",
    ]


def test_classify_levels() -> None:
    assert extract.classify("X MUST not be set.") == ("MUST NOT", "MUST not")
    assert extract.classify("X SHOULD be set, and MUST be y.") == ("MUST", "MUST")
    assert extract.classify("It is illegal to send.") == ("PROHIBITED", "It is illegal")
    assert extract.classify("X should NOT expect y.") == ("SHOULD NOT", "should NOT")
    assert extract.classify("The peer MAY detach.") is None
    assert extract.classify("Should this happen, the peer MAY detach.") is None


# --- the manifest proper: links.toml, the checker rules, the cases ------------------------


def _registry_cases():
    from amqpspec.conformance.run.registry import load_cases

    return {c.case_id: c for c in load_cases()}


def test_every_sentence_has_a_reviewed_entry_and_no_entry_is_stray() -> None:
    links = manifest._load(manifest.LINKS_FILE)["sentence"]
    found = manifest.sentences()
    assert set(links) == set(found), "links.toml and sentences.toml disagree"
    for item in found.values():
        assert item.binds in manifest.BINDS, f"{item.id}: binds {item.binds!r}"
        if item.untestable:
            assert not item.cases, f"{item.id}: untestable yet tested by {item.cases}"


def test_entries_name_only_cases_and_rules_that_exist() -> None:
    from amqpspec.amqp10.checker.rules import RULES
    from amqpspec.reference_broker.faults.catalog import CATALOG

    cases = _registry_cases()
    for item in manifest.sentences().values():
        assert set(item.cases) <= set(cases), f"{item.id}: {set(item.cases) - set(cases)}"
        assert set(item.rules) <= set(RULES), item.id
    assert set(manifest.case_notes()) <= set(cases)
    for rule_id, note in manifest.rule_notes().items():
        assert rule_id in RULES, rule_id
        assert set(note) <= {"faults", "basis", "not_normative"}, rule_id
        assert set(note.get("faults", ())) <= set(CATALOG), rule_id


def test_every_case_names_a_sentence_or_says_why_it_cannot() -> None:
    """A case is linked from links.toml or names its ids in the registry (`sentences=`),
    or links.toml [case_notes] says why it checks no sentence binding the broker."""
    linked = {c for item in manifest.sentences().values() for c in item.cases}
    notes = manifest.case_notes()
    for case_id, case in _registry_cases().items():
        own = tuple(getattr(case, "sentences", ()) or ())
        assert set(own) <= set(manifest.sentences()), f"{case_id}: unknown ids {own}"
        named = bool(own) or case_id in linked
        assert named or case_id in notes, f"{case_id}: no sentence and no case note"


def test_cases_that_name_sentences_quote_the_xml() -> None:
    for case_id, case in _registry_cases().items():
        if getattr(case, "sentences", ()):
            assert spec.quoted_in_spec(case.sentence), f"{case_id} paraphrases: {case.sentence}"


def test_every_rule_quotes_the_xml_in_its_section_and_names_a_sentence() -> None:
    from amqpspec.amqp10.checker.rules import RULES

    notes = manifest.rule_notes()
    paragraphs = spec.paragraphs()
    for rule in RULES.values():
        in_section = [p.text for p in paragraphs if p.section == rule.section]
        assert any(spec.fold(rule.sentence) in text for text in in_section), (
            f"{rule.rule_id}: its sentence is not in {rule.section} of the XML"
        )
        for sentence_id in rule.sentences:
            assert sentence_id in manifest.sentences(), f"{rule.rule_id}: {sentence_id}"
        if rule.sentences:
            # the quote is (part of) the paragraph of one of the sentences it names
            texts = [manifest.sentence(i).text for i in rule.sentences]
            assert any(t in spec.fold(rule.sentence) or spec.fold(rule.sentence) in t
                       for t in texts) or rule.rule_id in notes, rule.rule_id  # fmt: skip
        else:
            assert notes.get(rule.rule_id, {}).get("not_normative"), (
                f"{rule.rule_id} names no sentence id and links.toml does not say why"
            )


def test_the_manifest_knows_which_rules_enforce_a_sentence() -> None:
    assert "link.credit.transfer-beyond-credit" in manifest.sentence("2.6.7/flow-control.11").rules
    assert manifest.sentence("2.7.4/flow.delivery-count.3").binds == "receiver"
    assert manifest.sentence("2.6.7/flow-control.11").binds == "sender"
    assert manifest.sentence("3.2/message-format.1").binds == "intermediary"


def test_manifest_coverage_counts_add_up() -> None:
    from amqpspec.conformance.manifest.report import measure_manifest

    coverage = measure_manifest()
    counts = coverage.counts()
    assert counts["sentences"] == len(manifest.sentences())
    assert (
        sum(coverage.counts(e)["sentences"] for e in coverage.by_part().values())
        == (counts["sentences"])
    )
    tested = {e.sentence.id for e in coverage.entries if e.cases or e.sentence.rules}
    untestable = {e.sentence.id for e in coverage.entries if e.untestable}
    assert counts["not yet"] == counts["sentences"] - len(tested | untestable)
    for entries in [coverage.entries, *coverage.by_section().values()]:  # one bucket each
        part = coverage.counts(entries)
        buckets = part["case"] + part["rule"] + part["untestable"] + part["not yet"]
        assert buckets == part["sentences"]
    flow = next(e for e in coverage.entries if e.sentence.id == "2.6.7/flow-control.11")
    assert flow.cases and flow.sentence.rules and not flow.not_yet
    assert all(not e.not_yet or e.sentence.binds for e in coverage.gaps())

#!/usr/bin/env python3
"""Makes a chat transcript written by the model itself, for the benchmark's "chat" domain suite.

The text is a set of multi-turn conversations rendered with the model's own chat template
(the GGUF's tokenizer.chat_template, applied by llama_cpp's Jinja2ChatFormatter exactly as
Llama.create_chat_completion applies it; for SmolLM2 this is ChatML). The user turns are the
fixed prompts below; every assistant turn is the model's greedy answer (temperature 0, top_k 1,
no repetition penalty, fixed seed, at most --max-tokens tokens, stopped at <|im_end|>).

It is kept in the repository as data rather than regenerated in the build, because greedy output
is only as deterministic as the floating point underneath it: a different BLAS/ggml build, thread
count or CPU can flip an argmax and change every token after it.

The checked-in file was made with (from the repository root; the model is fetched by scripts/
into ~/.cache/kvstream/models/):

  build-deps/python/bin/python lab/chat_transcript.py \
      --model ~/.cache/kvstream/models/SmolLM2-135M-Instruct.Q4_1.gguf \
      --out bench/domains/chat-smollm2.txt

Output: each conversation as the template renders it (system, then user/assistant turns, every
turn closed with <|im_end|>\n), conversations separated by one blank line. Statistics (token
count, timing, answers that look like repetition loops) go to stderr.
"""
import argparse
import collections
import os
import re
import sys
import time

import llama_cpp
from llama_cpp import Llama
from llama_cpp.llama_chat_format import Jinja2ChatFormatter

# A short article for the summarising conversation.
ARTICLE = (
    "The town of Millbrook voted last week to convert its old railway line into a twelve-mile "
    "walking and cycling path. Supporters argued that the path would bring visitors to local "
    "cafes and shops, give children a safe route to school, and encourage people to exercise. "
    "Opponents, many of them farmers whose land borders the line, worried about litter, loose "
    "dogs and trespassing, and asked who would pay for maintenance once the initial state grant "
    "runs out. After a three-hour meeting, the council approved the plan by seven votes to four, "
    "on the condition that fences be built along farm boundaries and that a volunteer group be "
    "formed to help with upkeep. Construction is expected to begin next spring and to take about "
    "eighteen months."
)

# A small buggy function for the code-review conversation.
BUGGY_CODE = (
    "def average(numbers):\n"
    "    total = 0\n"
    "    for n in numbers:\n"
    "        total += n\n"
    "    return total / len(numbers)\n"
)

# The fixed user turns, grouped into conversations (3-6 turns each). Later turns refer back to
# earlier answers, as follow-ups do in real chats.
CONVERSATIONS = [
    [
        "How do I reverse a string in Python?",
        "Can you show me how to do it without slicing, using a loop?",
        "Which of the two ways is faster, and why?",
        "Now write a function that checks whether a word is a palindrome.",
        "Can you make it ignore spaces and capital letters?",
    ],
    [
        "Explain what photosynthesis is in simple terms.",
        "Why are most plants green?",
        "What would happen to life on Earth if photosynthesis stopped?",
        "Can you summarise everything you said in three sentences?",
    ],
    [
        "Write a short, polite email to my manager, Maria, asking for Friday off to attend my sister's graduation. Keep it under 100 words and end it with \"Best regards, Alex\".",
        "Can you make it shorter? Just the message itself, no signature block.",
        "Make it a bit more formal, please.",
        "In two sentences, what should Maria reply if she agrees but needs the weekly report finished on Thursday?",
    ],
    [
        "Please summarise this news article in two or three sentences:\n\n" + ARTICLE,
        "What were the main concerns of the people who opposed the plan?",
        "Write a headline for the article.",
        "Do you think the council made a fair decision? Give one argument for each side.",
    ],
    [
        "A train leaves a station at 9:00 and travels at 60 miles per hour. How far has it gone by 11:30?",
        "If a second train leaves the same station at 10:00 at 80 miles per hour on the same track, when does it catch up with the first one?",
        "Sarah has 3 times as many apples as Tom. Together they have 24 apples. How many does each have?",
        "A shirt costs $40 and is on sale for 25% off. What is the sale price?",
        "Explain how you would check that answer is right.",
    ],
    [
        "I'm planning a one-week trip to Japan in April. What cities would you recommend?",
        "What is the best way to travel between Tokyo and Kyoto?",
        "What are some polite customs I should know about before I go?",
        "What foods should I try while I'm there?",
        "Can you put all of that into a short packing and planning checklist?",
    ],
    [
        "In a few sentences, how do I make a simple tomato soup at home?",
        "I don't have fresh tomatoes. Can I use canned ones instead?",
        "How can I make it creamier without using cream?",
        "What could I serve with it for a light dinner?",
    ],
    [
        "Who was Julius Caesar?",
        "Why was he assassinated?",
        "What happened to Rome after his death?",
        "How did the Roman Republic differ from the Roman Empire?",
        "Can you make that explanation shorter, for a ten-year-old?",
    ],
    [
        "What is the difference between a list and a tuple in Python?",
        "When should I use a dictionary instead of a list?",
        "Show me how to count how many times each word appears in a sentence.",
        "How would I sort those words by how often they appear?",
    ],
    [
        "I have trouble falling asleep at night. Do you have any tips?",
        "Is it bad to look at my phone before bed?",
        "In two sentences, how much sleep does an adult actually need?",
        "Which of your tips is the most important, and why?",
    ],
    [
        "Explain what a black hole is.",
        "How do scientists find black holes if light cannot escape them?",
        "What would happen if you fell into one?",
        "Is the Sun going to become a black hole?",
    ],
    [
        "Here is a Python function. Can you find the bug?\n\n" + BUGGY_CODE,
        "How would you fix it?",
        "Can you add a docstring and type hints to the fixed version?",
        "Write two simple unit tests for it.",
    ],
    [
        "Write a short paragraph describing a walk through a forest in autumn.",
        "Now retell the same walk from the point of view of a fox.",
        "What is the fox looking for, and does it find it? Answer in a few sentences.",
        "Suggest a title for the story and explain why you chose it.",
    ],
    [
        "What are some good ways to save money on groceries?",
        "How do I make a simple monthly budget?",
        "What is the difference between a savings account and an investment account?",
        "Explain compound interest with a small example.",
        "Can you make that shorter?",
    ],
    [
        "What is the difference between weather and climate?",
        "Why does it get colder as you climb a mountain?",
        "How do clouds form?",
        "What causes thunder and lightning?",
    ],
    [
        "I'm learning Spanish. How do I say 'Where is the train station?'",
        "What is the difference between 'tu' and 'usted' in Spanish?",
        "Do you have tips for remembering new vocabulary?",
        "How long does it usually take to become conversational in a new language?",
    ],
    [
        "What does HTTP stand for, and what does it do?",
        "What is the difference between HTTP and HTTPS?",
        "What happens when I type a web address into my browser and press Enter?",
        "Explain what a DNS server does in one paragraph.",
    ],
    [
        "I have a job interview next week for a marketing assistant position. How should I prepare?",
        "What should I say when they ask me to describe my weaknesses?",
        "Write three questions I could ask the interviewer at the end.",
        "Write a three-sentence thank-you note to send after the interview.",
    ],
]

# The template's own default system prompt (SmolLM2's template inserts it when the first message
# is not a system message); it is passed explicitly so the transcript does not depend on that.
SYSTEM_PROMPT = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"

# One ChatML turn: <|im_start|>role\ncontent<|im_end|>\n
CHATML_TURN = re.compile(r"<\|im_start\|>(system|user|assistant)\n(.*?)<\|im_end\|>\n", re.S)


def check_chatml(text: str, messages: list) -> None:
    """Fails unless text is exactly the ChatML rendering of messages, turn by turn."""
    pos = 0
    for message in messages:
        m = CHATML_TURN.match(text, pos)
        if not m or m.group(1) != message["role"] or m.group(2) != message["content"]:
            raise SystemExit(f"rendered text is not ChatML at offset {pos}: {text[pos:pos + 80]!r}")
        pos = m.end()
    if pos != len(text):
        raise SystemExit(f"unexpected trailing text after the last turn: {text[pos:pos + 80]!r}")


def most_repeated_line(answer: str) -> tuple:
    """(count, line) of the most frequent non-empty line: a cheap sign of a repetition loop."""
    lines = [line.strip() for line in answer.splitlines() if line.strip()]
    if not lines:
        return 0, ""
    line, count = collections.Counter(lines).most_common(1)[0]
    return count, line


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True,
                        help="chat model GGUF, e.g. ~/.cache/kvstream/models/SmolLM2-135M-Instruct.Q4_1.gguf")
    parser.add_argument("--out", required=True, help="transcript file to write")
    parser.add_argument("--max-tokens", type=int, default=256, help="cap on each answer (tokens)")
    parser.add_argument("--max-conv-tokens", type=int, default=1800,
                        help="fail if one rendered conversation exceeds this many tokens")
    parser.add_argument("--n-ctx", type=int, default=2048)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    llm = Llama(model_path=args.model, n_ctx=args.n_ctx, n_threads=args.threads,
                n_threads_batch=args.threads, seed=args.seed, verbose=False)
    template = llm.metadata.get("tokenizer.chat_template")
    if not template:
        raise SystemExit("the GGUF has no tokenizer.chat_template")
    if llm.chat_format != "chat_template.default":
        raise SystemExit(f"llama_cpp picked chat format {llm.chat_format!r}, not the GGUF's template")
    # The same formatter create_chat_completion builds from the GGUF, but rendering whole
    # conversations (no trailing "<|im_start|>assistant\n" generation prompt).
    eos = llm._model.token_get_text(llm.token_eos())
    bos = llm._model.token_get_text(llm.token_bos())
    render = Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos,
                                 add_generation_prompt=False)
    render_prompt = Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos,
                                        add_generation_prompt=True)

    def n_tokens(text: str) -> int:
        return len(llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    start = time.time()
    texts, n_turns, answer_tokens, capped, loops = [], 0, 0, 0, []
    messages_all = []  # every answer, for the repetition statistics
    for ci, prompts in enumerate(CONVERSATIONS):
        messages = [{"role": "system", "content": SYSTEM_PROMPT}]
        for prompt in prompts:
            messages.append({"role": "user", "content": prompt})
            reply = llm.create_chat_completion(
                messages=messages, temperature=0.0, top_k=1, top_p=1.0, min_p=0.0,
                repeat_penalty=1.0, max_tokens=args.max_tokens, seed=args.seed)
            choice = reply["choices"][0]
            answer = choice["message"]["content"]
            answer_tokens += reply["usage"]["completion_tokens"]
            capped += choice["finish_reason"] == "length"
            count, line = most_repeated_line(answer)
            if count >= 4:
                loops.append((ci, len(messages) // 2, count, line[:60]))
            # The prompt the model saw must be a prefix of the final rendering.
            seen = render_prompt(messages=messages).prompt
            messages.append({"role": "assistant", "content": answer})
            messages_all.append(answer)
            n_turns += 1
        text = render(messages=messages).prompt
        if not text.startswith(seen):
            raise SystemExit(f"conversation {ci}: generation prompt is not a prefix of the rendering")
        check_chatml(text, messages)
        size = n_tokens(text)
        print(f"conversation {ci}: {len(prompts)} turns, {size} tokens, {time.time() - start:.0f}s",
              file=sys.stderr)
        if size > args.max_conv_tokens:
            raise SystemExit(f"conversation {ci} is {size} tokens, over --max-conv-tokens")
        texts.append(text)
    elapsed = time.time() - start

    transcript = "\n".join(texts)  # each rendering ends in "\n", so this leaves one blank line
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(transcript)

    print(f"llama_cpp {llama_cpp.__version__}; {len(texts)} conversations, {n_turns} answers "
          f"({answer_tokens} tokens, {capped} cut at --max-tokens) in {elapsed:.0f}s", file=sys.stderr)
    print(f"{args.out}: {len(transcript.encode('utf-8'))} bytes, {n_tokens(transcript)} tokens",
          file=sys.stderr)
    lines = [l.strip() for m in messages_all for l in m.splitlines() if l.strip()]
    repeated = len(lines) - len(set(lines))
    print(f"answer lines: {len(lines)}, {repeated} repeat an earlier line "
          f"({100 * repeated / max(1, len(lines)):.0f}%)", file=sys.stderr)
    for ci, turn, count, line in loops:
        print(f"  repetition: conversation {ci} answer {turn}: a line repeated {count}x: {line!r}",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

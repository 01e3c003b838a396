"""Chat templates of models whose tokenizer_config.json cannot be fetched
here (no network) and that llama.cpp's sdist does not vendor under
models/templates/. Data only; tools/gen-chat-goldens.py writes them to
tests/data/chat/<name>.jinja.

Where each text comes from:
  gemma-3-it   google/gemma-3-{1b,4b,12b,27b}-it tokenizer_config.json
               "chat_template" (the release template: system text becomes the
               first user turn's prefix, assistant -> "model", content lists of
               text/image items, strict alternation). Taken as quoted verbatim
               in several independent public repositories (a chat-template
               test "output checked against python transformers", SFT scripts
               that hard-code the template of google/gemma-3-270m-it); the
               copies agree character for character.
  mixtral-instruct  mistralai/Mixtral-8x7B-Instruct-v0.1 tokenizer_config.json
               "chat_template" (the 2024 revision with an optional leading
               system message folded into the first [INST]). Taken as quoted
               verbatim in public code (a notebook that hard-codes
               "mixtral_tokenizer.chat_template" of that repo, a vLLM server log
               printing the template it loaded); the copies agree.
"""

GEMMA_3_IT = """{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\\n\\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\\n'}}
{%- endif -%}
"""

MIXTRAL_INSTRUCT = """{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {%- if loop.first and system_message is defined %}
            {{- ' [INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' }}
        {%- else %}
            {{- ' [INST] ' + message['content'] + ' [/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'assistant' %}
        {{- ' ' + message['content'] + eos_token}}
    {%- else %}
        {{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}
    {%- endif %}
{%- endfor %}
"""

QUOTED = {"gemma-3-it": GEMMA_3_IT, "mixtral-instruct": MIXTRAL_INSTRUCT}

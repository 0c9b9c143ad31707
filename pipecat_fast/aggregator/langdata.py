"""Per-language data for the streaming segmenter: abbreviations, sentence starters, script marks.

Written for this project from general knowledge of each language's written conventions; it is
deliberately small (the common abbreviations a voice agent's LLM writes), not an exhaustive
lexicon. Every set holds lowercase forms without the final period; an entry may contain inner
periods (``"z.b"``) or hyphens (``"г-н"``).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class LanguageRules:
    """What the boundary rules need to know about one language.

    Attributes:
        code: Base language code (``"en"``, ``"de"``, ...).
        titles: Abbreviations that always precede a name or noun (``Dr.``, ``Mr.``): a period
            after them never ends a sentence before a capitalised word.
        abbreviations: Other abbreviations (``Inc.``, ``etc.``, ``approx.``): after them a
            capitalised word starts a new sentence only when it is a common sentence starter.
        numeric: Abbreviations that precede a number (``No. 5``, ``p. 55``, ``Jan. 20``).
        postpositive: Abbreviations that close a phrase (``a.m.``, ``Ph.D.``, ``B.C.``), and
            ``units``, which close one after a number (``5 lb.``): after them, in a clause of
            three words or more, a capitalised word starts a new sentence.
        starters: Capitalised words that usually begin a sentence (``The``, ``He``), used to
            decide after an abbreviation or the pronoun ``I``.
        ordinal_dot: The language writes ordinals as a number and a period (German ``12. Juni``),
            so a short number and a period before a capitalised word does not end a sentence.
        extra_terminators: ASCII marks that end a sentence in this language only (Greek ``;``
            is a question mark, Armenian text often types the full stop ``։`` as ``:``).
        vowel_final: Native words end in a vowel (Italian), so a word that ends in a consonant
            before a period is most likely cut short: an abbreviation (``psicol.``, ``idraul.``).
    """

    code: str
    titles: frozenset[str] = field(default_factory=frozenset)
    abbreviations: frozenset[str] = field(default_factory=frozenset)
    numeric: frozenset[str] = field(default_factory=frozenset)
    postpositive: frozenset[str] = field(default_factory=frozenset)
    units: frozenset[str] = field(default_factory=frozenset)
    starters: frozenset[str] = field(default_factory=frozenset)
    ordinal_dot: bool = False
    extra_terminators: str = ""
    vowel_final: bool = False


def _s(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Abbreviations that show up in many Latin-script languages (company forms, Latin phrases).
_COMMON_ABBR = _s(
    "etc vs ca cf approx inc ltd co corp llc plc gmbh ag sa bros dept univ min max tel ext fax "
    "al ibid op cit nb ps"
)
_COMMON_NUMERIC = _s("no nos nr nº n° nr tel fig figs vol vols art p pp pag")

_EN = LanguageRules(
    code="en",
    titles=_s(
        "mr mrs ms mx messrs mmes dr prof rev fr hon st mt ft sen rep gov gen lt col maj capt cpt "
        "cmdr sgt cpl pvt adm supt insp pres amb atty sr jr mme mlle"
    ),
    abbreviations=_COMMON_ABBR
    | _s(
        "jr sr esq phd md ba ma bsc msc dept est approx appt apt ave blvd rd ln hwy sq bldg ste "
        "ed eds trans viz misc hr hrs mins secs oz lb lbs yd mi pt qt gal sq cu govt intl natl "
        "mfg mgr asst acct assn assoc jan feb mar apr jun jul aug sep sept oct nov dec mon tue "
        "tues thu thur thurs fri wk wks mo mos yr yrs avg dir div"
    ),
    numeric=_COMMON_NUMERIC
    | _s(
        "ch chap sec sect eq eqs pg ex jan feb mar apr jun jul aug sep sept oct nov dec rm ste rs"
    ),
    postpositive=_s(
        "a.m p.m ph.d ll.m ll.b j.d m.d b.a m.a b.sc m.sc d.phil b.c a.d c.e b.c.e m.b.a"
    ),
    units=_s(
        "lb lbs oz ft in yd mi sq hr hrs min mins sec secs mo mos yr yrs wk wks pt qt gal cu "
        "tbsp tsp doz"
    ),
    starters=_s(
        "I I'm I've I'll I'd It It's He He's She She's We We're They They're You You're The This "
        "That That's These Those There There's Their Then Thus Hence However But And So Or Yet If "
        "In On At As For From To With By After Before During When Where What Why How Who Which "
        "Whose While Although Though Because Since Also A An My Our Your His Her Its Let's Please "
        "Yes No Now Here Today Tomorrow Yesterday Finally First Second Third Next Meanwhile "
        "Additionally Furthermore Moreover Do Does Did Is Are Was Were Can Could Would Will "
        "Should Shall May Might Must Have Has Had Not Nothing Everything Everyone Someone Some "
        "Many Most All Each Every Both Thanks Thank Sure Okay Ok Great Good Well Oh Hi Hello "
        "Sorry Unfortunately Alternatively Otherwise Instead Again Still Just Only"
    ),
)

_DE = LanguageRules(
    code="de",
    titles=_s("hr hrn fr frl dr prof st gebr dipl ing mag"),
    abbreviations=_COMMON_ABBR
    | _s(
        "bzw usw vgl evtl ggf inkl exkl zzgl abs abschn abt allg bd bspw dgl dt ebd einschl engl "
        "erg ev evang kath gest geb hrsg jh jhd kap lt mio mrd mwst pkt rd sog str tsd usf insb "
        "mind bes gem ggü med phil rer nat jur dr.-ing o.ä u.a u.ä u.u v.a z.t z.z zt zz zzt d.h "
        "i.d.r i.a u.v.m z.b s.o s.u jan feb mär apr jun jul aug sep sept okt nov dez"
    ),
    numeric=_COMMON_NUMERIC
    | _s("s abs kap bd nr str jan feb mär apr jun jul aug sep sept okt nov dez"),
    starters=_s(
        "Ich Du Er Sie Es Wir Ihr Der Die Das Dies Diese Dieser Ein Eine Einen Es Dann Aber Und "
        "Oder Wenn Als Wie Was Wo Warum Wer Im In Am Auf Mit Nach Vor Bei Danach Außerdem Jedoch "
        "Trotzdem Deshalb Daher Heute Morgen Gestern Ja Nein Bitte Danke Hier Da Man Mein Unser"
    ),
    ordinal_dot=True,
)

_DA = LanguageRules(
    code="da",
    titles=_s("hr fr frk dr prof skt st"),
    abbreviations=_COMMON_ABBR
    | _s(
        "bl.a f.eks dvs osv mht pga vedr evt jf kl tlf stk inkl ekskl mfl mv fx hhv iflg ifm "
        "ca adr afd alm bl jan feb mar apr jun jul aug sep sept okt nov dec"
    ),
    numeric=_COMMON_NUMERIC | _s("kl stk s nr"),
    starters=_s(
        "Jeg Du Han Hun Den Det De Vi I Der Som Men Og Eller Hvis Når Hvad Hvor Hvorfor Hvem Jo "
        "Nej Ja Tak Her Nu Så Efter Før Med På Til Fra En Et Min Vores"
    ),
    ordinal_dot=True,
)

_NB = LanguageRules(
    code="nb",
    titles=_s("hr fr frk dr prof st"),
    abbreviations=_COMMON_ABBR | _s("bl.a f.eks dvs osv mht pga vedr evt jf kl tlf stk inkl mfl"),
    numeric=_COMMON_NUMERIC | _s("kl s nr"),
    starters=_s("Jeg Du Han Hun Den Det De Vi Dere Men Og Eller Hvis Når Hva Hvor Hvorfor Ja Nei"),
    ordinal_dot=True,
)

_SV = LanguageRules(
    code="sv",
    titles=_s("hr fr frk dr prof st"),
    abbreviations=_COMMON_ABBR | _s("bl.a t.ex dvs osv mm m.m s.k t.o.m fr.o.m kl tfn st resp"),
    numeric=_COMMON_NUMERIC | _s("kl s nr"),
    starters=_s("Jag Du Han Hon Den Det De Vi Ni Men Och Eller Om När Vad Var Varför Ja Nej"),
)

_FI = LanguageRules(
    code="fi",
    titles=_s("hra rva nti tri prof dr"),
    abbreviations=_COMMON_ABBR | _s("esim ks mm ns nk jne yms ym ts tms n klo s vrt puh os v ma"),
    numeric=_COMMON_NUMERIC | _s("klo s n v"),
    starters=_s("Minä Sinä Hän Se Me Te He Tämä Mutta Ja Jos Kun Mitä Miksi Missä Kyllä Ei"),
    ordinal_dot=True,
)

_NL = LanguageRules(
    code="nl",
    titles=_s("dhr mevr mw dr prof ir ing mr drs st"),
    abbreviations=_COMMON_ABBR
    | _s("blz bijv bv d.w.z m.a.w o.a i.p.v t.o.v enz evt resp ca nl vnw aanw jl vlg zgn"),
    numeric=_COMMON_NUMERIC | _s("blz nr"),
    starters=_s(
        "Ik Jij Je Hij Zij Ze Het Wij We Jullie De Dit Dat Deze Er Maar En Of Als Wat Ja Nee"
    ),
)

_FR = LanguageRules(
    code="fr",
    titles=_s("m mm mme mmes mlle mlles dr pr me st ste mgr"),
    abbreviations=_COMMON_ABBR
    | _s("env av bd apr janv févr avr juil sept oct nov déc cie éd coll etc chap"),
    numeric=_COMMON_NUMERIC | _s("p pp chap t n°"),
    starters=_s(
        "Je Tu Il Elle On Nous Vous Ils Elles Le La Les Un Une Ce Cette Ces Mais Et Ou Donc Si "
        "Quand Que Qui Où Pourquoi Comment Oui Non Merci Ensuite Puis Alors Aujourd'hui"
    ),
)

_IT = LanguageRules(
    code="it",
    titles=_s(
        "sig sigg sig.ra sig.na dott dott.ssa prof prof.ssa ing avv arch geom rag on mons sr sra "
        "dir gen col cap egr gent spett"
    ),
    abbreviations=_COMMON_ABBR
    | _s(
        "ecc es ad.es pag tel cap art n nn vol fig cfr gen feb mar apr mag giu lug ago set ott "
        "nov dic amm"
    ),
    numeric=_COMMON_NUMERIC | _s("pag n nn cap art"),
    starters=_s(
        "Io Tu Lui Lei Noi Voi Loro Il Lo La Le Gli I Un Una Uno Questo Questa Quello Quella Ma "
        "E O Se Quando Che Chi Dove Perché Come Cosa Sì No Non Grazie Poi Allora Oggi Domani Ieri "
        "Dopo Prima Ecco Anche Quindi Inoltre Però Infatti Ciao Salve Buongiorno Buonasera "
        "Arrivederci Mi Ti Ci Vi Si Per Con In Da Di Al Nel Sul C'è Ci Purtroppo Certo Va"
    ),
    vowel_final=True,
)

_ES = LanguageRules(
    code="es",
    titles=_s("sr sra srta sres dr dra lic ing arq prof d dña ud uds vd vds mtro"),
    abbreviations=_COMMON_ABBR
    | _s(
        "av avda c cra núm pág ej p.ej aprox dpto depto cía s.a ene feb mar abr may jun jul "
        "ago sept set oct nov dic atte"
    ),
    numeric=_COMMON_NUMERIC | _s("núm pág cra c av avda"),
    starters=_s(
        "Yo Tú Él Ella Nosotros Ustedes Ellos El La Los Las Un Una Este Esta Eso Pero Y O Si "
        "Cuando Que Quien Donde Por Como Sí No Gracias Luego Entonces Hoy Buenos Buenas"
    ),
)

_PT = LanguageRules(
    code="pt",
    titles=_s("sr sra srta dr dra prof profa eng"),
    abbreviations=_COMMON_ABBR
    | _s("av r pág ex cia ltda s.a jan fev mar abr mai jun jul ago set out nov dez"),
    numeric=_COMMON_NUMERIC | _s("pág n r av"),
    starters=_s(
        "Eu Tu Ele Ela Nós Eles Elas O A Os As Um Uma Este Esta Mas E Ou Se Quando Sim Não"
    ),
)

_PL = LanguageRules(
    code="pl",
    titles=_s("prof dr mgr inż hab ks p"),
    abbreviations=_COMMON_ABBR
    | _s("np tzn tj itd itp m.in ok ul al pl godz tys mln mld zł gr r w ww tzw wg por zob ang łac"),
    numeric=_COMMON_NUMERIC | _s("nr s str godz ul al"),
    starters=_s("Ja Ty On Ona Ono My Wy Oni To Ten Ta Ale I Lub Jeśli Gdy Co Kto Gdzie Tak Nie"),
    ordinal_dot=True,
)

_CS_SK = _s(
    "napr atď tzv resp t.j t.z č s str ul nám prof doc ing mgr bc phdr judr mudr rndr hod min "
    "sek tis mil mld ods písm zb stor a.s s.r.o spol"
)
_SK = LanguageRules(
    code="sk",
    titles=_s("prof doc ing mgr bc phdr judr mudr rndr p"),
    abbreviations=_COMMON_ABBR | _CS_SK,
    numeric=_COMMON_NUMERIC | _s("č s str ods"),
    starters=_s("Ja Ty On Ona Ono My Vy Oni To Ten Táto Ale A Alebo Ak Keď Čo Kto Kde Áno Nie"),
    ordinal_dot=True,
)
_CS = LanguageRules(
    code="cs",
    titles=_SK.titles,
    abbreviations=_COMMON_ABBR | _CS_SK | _s("atd apod mj"),
    numeric=_SK.numeric,
    starters=_s("Já Ty On Ona Ono My Vy Oni To Ten Tato Ale A Nebo Když Co Kdo Kde Ano Ne"),
    ordinal_dot=True,
)

_RU = LanguageRules(
    code="ru",
    titles=_s("г-н г-жа г-ну проф акад доц д-р тов св"),
    abbreviations=_s(
        "г гг т.е т.д т.п т.к т.н т.г др пр см ср стр с ул д кв им тыс млн млрд руб коп ок обл "
        "р-н р ст чел мин сек ч дол долл напр пл куб куб.м кв.м пгт у.е ред изд англ рус лат "
        "янв фев февр мар апр авг сент окт нояб дек"
    ),
    numeric=_s("г гг с стр ул д кв ст ч п рис табл №"),
    starters=_s("Я Ты Он Она Оно Мы Вы Они Это Этот Эта Но И А Или Если Когда Что Кто Где Да Нет"),
)

_UK = LanguageRules(
    code="uk",
    titles=_s("проф акад доц д-р п пан пані"),
    abbreviations=_s(
        "р рр м т.д т.п т.зв ім вул буд кв див напр с ст тис млн млрд грн коп ін пор обл р-н "
        "год хв сек стор журн вид чл зб ред упоряд акад"
        "січ лют бер квіт трав черв лип серп вер жовт лист груд"
    ),
    numeric=_s("р рр с ст стор вул буд кв год хв №"),
    starters=_s("Я Ти Він Вона Воно Ми Ви Вони Це Цей Ця Але І А Або Якщо Коли Що Хто Де Так Ні"),
)

_BG = LanguageRules(
    code="bg",
    titles=_s("г-н г-жа г-ца проф акад доц д-р др пл ул бул"),
    abbreviations=_s(
        "г гр т.г т.е т.нар напр вкл др пр с стр млн млрд хил лв ст ч чл ал ок изд вж ср"
    ),
    numeric=_s("г с стр ул бул ч чл ал №"),
    starters=_s("Аз Ти Той Тя То Ние Вие Те Това Този Тази Но И А Или Ако Когато Какво Кой Да Не"),
)

_KK = LanguageRules(
    code="kk",
    titles=_s("проф акад доц"),
    abbreviations=_s("т.б т.с.с ж жж б.з.б б.з мыс ғ км т с ст"),
    numeric=_s("ж жж ғ с"),
    starters=_s("Мен Сен Ол Біз Сіз Олар Бұл Осы Бірақ Және Егер Не Кім Қайда Иә Жоқ"),
)

_EL = LanguageRules(
    code="el",
    titles=_s("δρ κ κα καθ"),
    abbreviations=_s("π.χ κ.λπ κ.α δηλ αρ σελ τηλ χλμ εκ ομ κ.ο.κ π.Χ μ.Χ"),
    numeric=_s("αρ σελ τηλ"),
    starters=_s("Εγώ Εσύ Αυτός Αυτή Εμείς Εσείς Αυτοί Ο Η Το Οι Τα Αλλά Και Αν Όταν Τι Ναι Όχι"),
    extra_terminators=";",
)

_HY = LanguageRules(code="hy", extra_terminators=":")

RULES: dict[str, LanguageRules] = {
    r.code: r
    for r in (
        _EN,
        _DE,
        _DA,
        _NB,
        _SV,
        _FI,
        _NL,
        _FR,
        _IT,
        _ES,
        _PT,
        _PL,
        _SK,
        _CS,
        _RU,
        _UK,
        _BG,
        _KK,
        _EL,
        _HY,
    )
}
RULES["no"] = RULES["nn"] = _NB


def rules_for(language: str | None) -> LanguageRules:
    """Return the rules for a language code such as ``"en"``, ``"de-DE"`` or ``"pt_BR"``.

    Unknown languages, ``None``, ``""`` and ``"auto"`` get the English rules; the terminators
    of every script (CJK, Devanagari, Arabic, Ethiopic, ...) apply whatever the language.
    """
    if not language:
        return _EN
    code = language.strip().lower().replace("_", "-").split("-")[0]
    return RULES.get(code, _EN)
